//go:build !linux

package shm

// offmap runs on Linux only (see the README's list of platforms): futexes,
// FUTEX_WAITV, flock and /proc are what its cross-process locks, wake-ups
// and dead-process checks are built on. Built elsewhere, this is the one
// error the compiler reports.
var _ = offmap_runs_on_linux_only
