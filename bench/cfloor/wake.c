// wake.c: the machine's floor for waking a blocked reader in another
// process, with no Go runtime and no queue: a writer stamps a message
// every millisecond into a shared ring, publishes its sequence number and
// calls FUTEX_WAKE on it; the reader sleeps in FUTEX_WAIT whenever it has
// read everything. Latency is measured as in BenchmarkCrossProcessWake
// (queue/latency_bench_test.go): from the scheduled send time (corrected
// for coordinated omission) and from the actual send time (uncorrected).
// The writer sleeps until 50 us before each send and spins the rest, as
// the Go benchmark's pacer does. With the argument "split", the writer
// runs on CPU 0 and the reader on CPU 1, so that every wake-up crosses
// CPUs; without it the kernel places them, and on a 2-CPU machine it
// mostly wakes the reader where the writer is about to sleep.
//
//   gcc -O2 -o /tmp/wakefloor bench/cfloor/wake.c && /tmp/wakefloor [split]
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { N = 3000, WARMUP = 500, RING = 4096, GAP_NS = 1000000, SPIN_NS = 50000 };

struct shared {
	_Alignas(64) uint32_t seq; // a futex word: 32 bits
	_Alignas(64) uint64_t sched[RING], sent[RING];
};

static uint64_t now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

static void sleep_until(uint64_t t) {
	struct timespec ts = {.tv_sec = t / 1000000000u, .tv_nsec = t % 1000000000u};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, 0) != 0)
		;
}

static long futex(uint32_t *w, int op, uint32_t v) { return syscall(SYS_futex, w, op, v, 0, 0, 0); }

static int cmp(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *v) {
	qsort(v, N, sizeof *v, cmp);
	printf("%-12s p50 %.2f us  p99 %.1f us  p99.9 %.1f us  worst %.1f us\n", name,
	       v[N / 2] / 1e3, v[N / 100 * 99] / 1e3, v[N / 1000 * 999] / 1e3, v[N - 1] / 1e3);
}

static void pin(int cpu) {
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

int main(int argc, char **argv) {
	int split = argc > 1 && strcmp(argv[1], "split") == 0;
	struct shared *sh = mmap(0, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	pid_t child = fork();
	if (child == 0) {
		if (split)
			pin(1);
		uint64_t *corrected = malloc(N * sizeof(uint64_t)), *raw = malloc(N * sizeof(uint64_t));
		for (uint32_t seen = 0; seen < WARMUP + N;) {
			uint32_t seq = __atomic_load_n(&sh->seq, __ATOMIC_ACQUIRE);
			if (seq == seen) {
				futex(&sh->seq, FUTEX_WAIT, seen); // shared, not private: two processes
				continue;
			}
			for (; seen < seq; seen++) {
				uint64_t t = now();
				if (seen >= WARMUP) {
					corrected[seen - WARMUP] = t - sh->sched[seen % RING];
					raw[seen - WARMUP] = t - sh->sent[seen % RING];
				}
			}
		}
		report("corrected", corrected);
		report("uncorrected", raw);
		return 0;
	}
	if (split)
		pin(0);
	usleep(100000);
	uint64_t sched = now();
	for (uint32_t i = 0; i < WARMUP + N; i++) {
		sched += GAP_NS;
		sleep_until(sched - SPIN_NS);
		while (now() < sched)
			;
		sh->sched[i % RING] = sched;
		sh->sent[i % RING] = now();
		__atomic_store_n(&sh->seq, i + 1, __ATOMIC_RELEASE);
		futex(&sh->seq, FUTEX_WAKE, 1);
	}
	waitpid(child, 0, 0);
	return 0;
}
