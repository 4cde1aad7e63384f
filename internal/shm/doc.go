// Package shm holds what offmap's map and queue files share: mapping a
// file, the typed atomic overlays on mapped bytes, the seqlock-safe copies,
// futexes, process identity and a lock word that survives a dead holder.
//
// Every mmap call and nearly all unsafe code of the project live in this
// package, so that the rest of the code base sees only bounds-checked
// accessors: pointer arithmetic on mapped bytes in overlay.go (typed
// atomic overlays), copy_atomic.go (seqlock-safe copies) and view.go (a
// slice header readable while another goroutine extends it); mappings in
// mmap_linux.go and region_linux.go; system calls taking pointers in
// futex_linux.go and futexwaitv_linux.go; assembly in prefetch_amd64.s and
// store_amd64.s; and a go:linkname to the runtime's nanotime in yield.go.
// Outside it, only values/unsafe.go (a struct's bytes for its Codec) and
// bench/latency/clock.go (go:linkname, for the benchmark clock) use
// package unsafe.
//
// The package is Linux-only: it relies on futexes, flock and /proc.
package shm
