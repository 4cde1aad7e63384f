//go:build !linux && !darwin

package shm

// offmap supports Linux and macOS only (see docs/PLATFORMS.md):
// shared file mappings, flock, and a way to tell whether a
// process still lives are what its cross-process locks, wake-ups and
// dead-process checks are built on. Built elsewhere, this is the one error
// the compiler reports.
var _ = offmap_supports_only_linux_and_darwin
