// pages.c: what a fresh page of a tmpfs file costs on this machine, the
// cost the queue's pretoucher pays for every 4 KiB of new messages (it
// faults pages in with MADV_POPULATE_WRITE, queue/pretouch.go). It
// faults in 4 GiB of a new file in the given directory, frees it, and
// does it again at once: the first round takes pages the kernel has had
// free for a while, the second the pages just freed. On a VM whose guest
// reports free memory to the host (virtio-balloon free page reporting),
// memory free for a few seconds goes back to the host, and the host must
// back each page again when the guest next uses it; so the program first
// waits 10 s, and the first round is what a steady writer of new pages
// meets. It prints each round as it ends, in us a page, three of each:
//
//	rested 9.38 us
//	again 4.23 us
//
//   gcc -O2 -o /tmp/pagefloor bench/cfloor/pages.c && /tmp/pagefloor /dev/shm
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { ROUNDS = 3, MIB = 4096, REST_S = 10 };

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

// round faults in a new file of MIB MiB in dir and returns us a page.
static double round_us(const char *dir) {
	char path[4096];
	snprintf(path, sizeof path, "%s/pagefloor-%d", dir, (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	unlink(path);
	size_t n = (size_t)MIB << 20;
	if (ftruncate(fd, n) != 0) {
		perror("ftruncate");
		exit(1);
	}
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	double t = now();
	if (madvise(p, n, MADV_POPULATE_WRITE) != 0) {
		perror("madvise(MADV_POPULATE_WRITE)");
		exit(1);
	}
	double us = (now() - t) * 1e6 / (n / 4096);
	munmap(p, n);
	close(fd);
	return us;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR (a directory on tmpfs)\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < ROUNDS; i++) {
		sleep(REST_S);
		printf("rested %.2f us\n", round_us(argv[1]));
		printf("again %.2f us\n", round_us(argv[1]));
		fflush(stdout);
	}
	return 0;
}
