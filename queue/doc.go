// Package queue is a persisted message queue in memory-mapped files,
// shared by any number of goroutines and processes on one machine, in the
// spirit of Chronicle Queue.
//
// A queue is a directory: queue.meta (settings, writer leases, named
// tailers, the doorbell) and one cycle file per roll cycle (daily,
// hourly, minutely, secondly, or every 100 ms with Fast), named after the
// cycle's start time. Cycle files grow in preallocated blocks
// (Options.BlockSize) inside an address range reserved for the largest
// one, so a full disk is an error from the append that needs the space,
// never a SIGBUS, and views never move.
//
// Every message has a 64-bit index, cycle << 32 | sequence. Appends claim
// the first free slot by CAS on its 8-byte header (0 -> not-complete |
// length | writer lease), write the payload, and publish it with a CAS
// that clears not-complete; readers stop at a free or not-complete slot.
// A slot whose writer died (its process gone, known by the lock it held on
// a byte of queue.meta, which the kernel drops when it dies) is marked
// skipped after Options.SkipAfter; a live writer is waited for. A sparse
// index (every IndexSpacing-th message) lets a tailer seek without
// scanning a cycle. docs/QUEUE-FORMAT.md gives the layout, the header
// bits and the numbered steps.
//
// Waiting: Tailer.Wait spins, yields, parks with back-off, or blocks. A
// blocked tailer is woken directly by appends in its own process, and by
// appends in other processes through a futex doorbell in queue.meta that
// one notifier per process watches for many queues at once (FUTEX_WAITV);
// appenders make no system call while nobody waits. BlockThread skips the
// notifier: the tailer sleeps on the doorbell from its own thread, a
// shorter wake-up for one thread per waiting tailer. WaitSet lets an
// event loop wait for many tailers at once.
//
// Where to put a queue: its pages live in the page cache either way, and
// the kernel writes those of a disk file back in bursts (when dirty
// memory reaches its threshold, or 30 s after a file was first dirtied).
// Under sustained appends of tens of MB a second a burst costs seconds of
// kernel CPU and write faults on the pages being appended to, which
// appenders and readers feel as stalls. A queue that only needs to
// outlive processes, not the machine, belongs on tmpfs (/dev/shm), which
// never writes back; docs/BENCHMARKS.md has the measurements.
//
// Queue.Check (and offqueue verify) checks every file without changing it.
package queue

// The files, by what each owns:
//
//	queue.go    Open, Close, the metadata file, cycle names and the directory
//	typed.go    typed messages: fixed-layout types and binary forms
//	cycle.go    one mapped cycle file: references, mapping, growth
//	slots.go    the slot walker, claiming a slot, the write hint, sealing
//	append.go   Append, Reserve/Commit/Abort, rolling to the next cycle
//	tailer.go   reading: positions, crossing cycles, skipping dead writers
//	backward.go reading backwards, the last N, first and last index
//	count.go    counting messages between two indexes, a tailer's lag
//	index.go    the sparse index: recording entries, finding a message
//	lease.go    writer leases and the dead-writer test
//	named.go    the named-tailer table and acknowledgements
//	notify.go   the doorbell and the notifier thread that watches doorbells
//	wait.go     wait modes and the listeners of this process
//	set.go      waiting on many tailers at once
//	pretouch.go faulting in the next block ahead of appends
//	retention.go deleting old cycles
//	check.go    Check: the whole queue, read-only
//	stats.go    Stats
//	format.go   the file formats' constants and headers
