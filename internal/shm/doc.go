// Package shm holds what offmap's map and queue files share: mapping a
// file, the typed atomic overlays on mapped bytes, the seqlock-safe copies,
// futexes, process identity and a lock word that survives a dead holder.
//
// All unsafe pointer arithmetic and every mmap call of the project lives in
// this package (overlay.go, copy_*.go, mmap_linux.go, futex_linux.go), so
// the rest of the code base only sees bounds-checked accessors.
//
// The package is Linux-only: it relies on futexes, flock and /proc.
package shm
