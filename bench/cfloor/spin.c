// spin.c: the machine's floor for write-to-read latency between two
// processes, with no Go runtime and no queue: a writer stamps a message
// every 10 us into a shared ring and publishes its sequence number; a
// reader spins on that number. Latency is measured as in
// BenchmarkCrossProcessSpin (queue/latency_bench_test.go): from the
// scheduled send time (corrected for coordinated omission) and from the
// actual send time (uncorrected). With the argument "full", the writer
// sends each message as soon as the reader has read the one before, which
// the reader says by storing its count (BenchmarkCrossProcessSpinFull).
// With the argument "slots", messages go as the queue lays them out instead
// of through the ring: each in a 32-byte slot of its own in a buffer of all
// of them (faulted in before the run, as the queue's pretoucher does), its
// 8-byte header stored last, and the reader spins on the next slot's
// header rather than on a sequence number. That is the queue's protocol
// without Go and without the queue: the price of writing fresh lines.
//
//   gcc -O2 -o /tmp/spinfloor bench/cfloor/spin.c && /tmp/spinfloor [full] [slots]
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { N = 500000, RING = 4096, GAP_NS = 10000 };

struct slot {
	uint64_t header; // 0: free; stored last
	uint64_t sched, sent, pad;
};

struct shared {
	_Alignas(64) uint64_t seq;
	_Alignas(64) uint64_t ack; // messages read, back to back
	_Alignas(64) uint64_t sched[RING], sent[RING];
};

static uint64_t now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *v) {
	qsort(v, N, sizeof *v, cmp);
	printf("%-12s p50 %.2f us  p99 %.1f us  p99.9 %.1f us  worst %.1f us\n", name,
	       v[N / 2] / 1e3, v[N / 100 * 99] / 1e3, v[N / 1000 * 999] / 1e3, v[N - 1] / 1e3);
}

int main(int argc, char **argv) {
	int full = 0, slots = 0;
	for (int i = 1; i < argc; i++) {
		full |= strcmp(argv[i], "full") == 0;
		slots |= strcmp(argv[i], "slots") == 0;
	}
	struct shared *sh = mmap(0, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct slot *slot = slots ? mmap(0, N * sizeof *slot, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0) : 0;
	if (sh == MAP_FAILED || slot == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	pid_t child = fork();
	if (child == 0) {
		uint64_t *corrected = malloc(N * sizeof(uint64_t)), *raw = malloc(N * sizeof(uint64_t));
		for (uint64_t seen = 0; slots && seen < N; seen++) {
			while (__atomic_load_n(&slot[seen].header, __ATOMIC_ACQUIRE) == 0)
				;
			uint64_t t = now();
			corrected[seen] = t - slot[seen].sched;
			raw[seen] = t - slot[seen].sent;
			if (full)
				__atomic_store_n(&sh->ack, seen + 1, __ATOMIC_RELEASE);
		}
		for (uint64_t seen = 0; !slots && seen < N;) {
			uint64_t seq = __atomic_load_n(&sh->seq, __ATOMIC_ACQUIRE);
			for (; seen < seq; seen++) {
				uint64_t t = now();
				corrected[seen] = t - sh->sched[seen % RING];
				raw[seen] = t - sh->sent[seen % RING];
				if (full)
					__atomic_store_n(&sh->ack, seen + 1, __ATOMIC_RELEASE);
			}
		}
		report("corrected", corrected);
		report("uncorrected", raw);
		return 0;
	}
	usleep(100000);
	uint64_t sched = now();
	for (uint64_t i = 0; i < N; i++) {
		if (full) {
			while (__atomic_load_n(&sh->ack, __ATOMIC_ACQUIRE) < i)
				;
			sched = now();
		} else {
			sched += GAP_NS;
			while (now() < sched)
				;
		}
		if (slots) {
			slot[i].sched = sched;
			slot[i].sent = now();
			__atomic_store_n(&slot[i].header, 24, __ATOMIC_RELEASE);
			continue;
		}
		sh->sched[i % RING] = sched;
		sh->sent[i % RING] = now();
		__atomic_store_n(&sh->seq, i + 1, __ATOMIC_RELEASE);
	}
	waitpid(child, 0, 0);
	return 0;
}
