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
// The package builds for Linux and macOS (darwin); elsewhere the compiler
// reports one error, undefined: offmap_supports_only_linux_and_darwin
// (unsupported.go). Linux uses its own primitives; macOS, which lacks
// some, uses portable fallbacks with the same guarantees. The build tag
// offmap_portable makes Linux use the fallbacks too, so that the code
// macOS runs is tested on Linux (CI runs every test of offmap, values and
// queue that way). Which file does what:
//
//	both          file.go      OpenFile (regular files only, never blocking)
//	              mmap.go      Map, Flock, extendZeroed, createViaTempName
//	              region.go    Reserve and Extend: a growing file mapped at a fixed address
//	              proc.go      Token, Self, Alive: the dead-holder check
//	              mutex.go     the lock word; header.go: file headers
//	Linux         proc_linux.go  start time from /proc/PID/task/PID/stat; nice 19
//	macOS         proc_darwin.go start time from sysctl kern.proc.pid; background band
//	Linux native  futex_linux.go, futexwaitv_linux.go  FUTEX_WAIT/WAKE, FUTEX_WAITV
//	              create_linux.go  Preallocate (fallocate), CreateAtomic (O_TMPFILE)
//	              back_linux.go    holes filled with fallocate (SEEK_HOLE, block count)
//	              populate_linux.go  MADV_POPULATE_WRITE
//	portable      futex_portable.go  polling waits with bounded back-off
//	              create_portable.go Preallocate writes zeros; CreateAtomic via a temporary name
//	              back_portable.go   holes filled through a mapping (atomic add of zero per page)
//	              populate_portable.go  one atomic add of zero per page
//
// The portable files build for darwin || (linux && offmap_portable), the
// native ones for linux && !offmap_portable. What the fallbacks cost is in
// the README and docs/BENCHMARKS.md.
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
