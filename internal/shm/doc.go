// Package shm holds what offmap's map and queue files share: mapping a
// file, the typed atomic overlays on mapped bytes, the seqlock-safe copies,
// cross-process waits, process identity and a lock word that survives a
// dead holder.
//
// Every mmap call and nearly all unsafe code of the project live in this
// package, so that the rest of the code base sees only bounds-checked
// accessors: pointer arithmetic on mapped bytes in overlay.go (typed
// atomic overlays), copy_atomic.go (seqlock-safe copies) and view.go (a
// slice header readable while another goroutine extends it); mappings in
// mmap.go, region.go and back_portable.go; system calls taking pointers in
// futex_linux.go and futexwaitv_linux.go; assembly in prefetch_amd64.s and
// store_amd64.s; and a go:linkname to the runtime's nanotime in yield.go.
// Outside it, only values/unsafe.go (a struct's bytes for its Codec) and
// bench/latency/clock.go (go:linkname, for the benchmark clock) use
// package unsafe.
//
// # Platforms
//
// The package builds for Linux, macOS (darwin) and Windows on 64-bit
// little-endian processors; elsewhere (other systems, 32-bit or
// big-endian processors) the compiler reports one error, undefined:
// offmap_supports_only_linux_darwin_windows_on_64bit_little_endian
// (unsupported.go). Linux uses its own primitives; macOS, which lacks
// some, uses portable fallbacks with the same guarantees. The build tag
// offmap_portable makes Linux use the fallbacks too, so that the code
// macOS runs is tested on Linux (CI runs every test of offmap, values and
// queue that way). Which file does what:
//
//	both          file.go      OpenFile (regular files only, never blocking)
//	              mmap.go      Map, Flock, extendZeroed, createViaTempName, createRemoved
//	              region.go    Reserve and Extend: a growing file mapped at a fixed address
//	              proc.go      Token, Witness: the dead-holder check (Liveness, below)
//	              mutex.go     the lock word; header.go: file headers
//	Linux         witness_linux.go  tokens are open file description locks
//	              thread_linux.go   nice 19 for background threads
//	macOS         witness_darwin.go tokens are pid + start time (sysctl kern.proc.pid); background band
//	Linux native  futex_linux.go, futexwaitv_linux.go  FUTEX_WAIT/WAKE, FUTEX_WAITV
//	              create_linux.go  Preallocate (fallocate), CreateAtomic, CreateUnnamed (O_TMPFILE)
//	              back_linux.go    holes filled with fallocate (SEEK_HOLE, block count)
//	              populate_linux.go  MADV_POPULATE_WRITE
//	portable      futex_portable.go  polling waits with bounded back-off
//	              create_portable.go Preallocate writes zeros; CreateAtomic, CreateUnnamed via a temporary name
//	              back_portable.go   holes filled through a mapping (atomic add of zero per page)
//	              populate_portable.go  one atomic add of zero per page
//
//	Windows       sys_windows.go     calls x/sys/windows lacks (VirtualAlloc2, MapViewOfFile3, MapViewOfFileEx)
//	              region_windows.go  placeholders split and replaced by views, one per growth step;
//	                                 a foreign file's unaligned end as a last, plain view
//	              mmap_windows.go    Map, LockFileEx locks, createViaTempName (MoveFileEx)
//	              file_windows.go    sharing flags, sizes, sparse files, Remove via a hidden name
//	              witness_windows.go tokens are LockFileEx byte locks
//
// Windows builds the portable futexes and create_portable.go too. Its placeholders come from
// kernelbase.dll through LazyDLL procs, as mmap-go would not give them
// (it remaps on growth, so slices would move); Windows 10 1803 or later.
//
// The portable files build for darwin || (linux && offmap_portable), the
// native ones for linux && !offmap_portable. What the fallbacks cost is in
// docs/PLATFORMS.md and docs/BENCHMARKS.md.
//
// # Liveness
//
// A lock word or a writer lease names its holder by a Token, and a waiter
// that finds the holder dead takes over. Judging a live holder dead
// corrupts data (two writers in one segment), so the judgement rests on
// something the kernel keeps for every process that has the file open and
// drops when it dies, and that every process sharing the file can see
// whatever its pid namespace, uid or /proc: on Linux, an open file
// description lock (fcntl F_OFD_SETLK) that each open of a file for
// writing holds on one byte of that same file, at an offset in [2^62,
// 2^63) that is its token (witness_linux.go; the layout is in
// docs/FORMAT.md, Tokens). A waiter asks with F_OFD_GETLK: a lock there
// means alive, none means dead, a failed call means unknown, which counts
// as alive: the waiter waits, up to its timeout, and never takes over.
//
// Alternatives, measured with BenchmarkAlive (go test -run '^$' -bench
// Alive -count 5 ./internal/shm, median of 5, one run) on the 2-vCPU VM
// of docs/BENCHMARKS.md, otherwise idle, 2026-12-02 15:22 UTC:
//
//   - pid + start time from /proc/PID/stat, the design before: wrong
//     wherever the waiter cannot see the holder in /proc (another pid
//     namespace, hidepid=2, no /proc), where a live holder looked dead
//     within 20 ms; and 24.9 us a check, 13x the chosen one. Adding the
//     pid namespace's inode to the token tells only that the namespaces
//     differ, not whether the holder lives: such a holder could only be
//     waited for forever.
//   - flock on a file of each process's own (NAME.live/TOKEN): right
//     across namespaces too, but a check opens a file, tries its lock and
//     closes it (5.9 us, 3.2x), a dead process leaves its file behind for
//     someone to delete, and the directory must be writable by every
//     user.
//   - an OFD lock on the shared file itself: 1.86 us a check, no other
//     file, nothing left behind, and a reader with a read-only descriptor
//     can ask too. Chosen.
//
// Limits. OFD locks are Linux's (3.15 and later). A process whose file
// description outlives it (a child forked without exec that keeps the
// descriptor; the files are opened O_CLOEXEC) keeps its token alive, so
// its locks are waited for, never stolen. NFS and other network file
// systems pass the locks to the server, where a shared mapping is not
// coherent across hosts anyway; flock(2) there may be emulated with
// byte-range locks that conflict with ours. A file system without such
// locks makes a writable open fail with ErrNoFileLocks rather than run
// without a witness. macOS has no OFD locks (its fcntl locks belong to
// the process and are dropped by any close of the file in it, and a
// flock cannot be tested without being taken), but it has no pid
// namespaces and its sysctl answers for every user's processes, so there
// a token is the pid and its start time (witness_darwin.go).
//
// # Decisions
//
// Mappings use golang.org/x/sys/unix rather than github.com/edsrzf/mmap-go:
// a Region reserves address space (PROT_NONE) and maps the file into it
// with MAP_FIXED as the file grows, so that slices into it never move, and
// Release puts private zero pages at the same address with MAP_FIXED;
// mmap-go maps only at an address the kernel picks and returns a []byte,
// so it cannot do either, and x/sys is a dependency already.
//
// Cross-process waits on macOS poll (futex_portable.go): macOS has no
// futex that Go can call without cgo. __ulock_wait and, from macOS 14.4,
// os_sync_wait_on_address would do, but they are libSystem functions that
// golang.org/x/sys does not wrap; reaching them needs cgo or linkname
// tricks into the runtime's libcall path, and the module stays free of
// both (go build with CGO_ENABLED=0 works everywhere). A poll that backs
// off from 50 us to 2 ms bounds the wake-up latency by 2 ms and costs one
// timer wake-up per 2 ms per waiting goroutine (one notifier goroutine
// watches every queue of a process).
package shm
