//go:build !(linux || darwin || windows) || !(amd64 || arm64 || loong64 || mips64le || ppc64le || riscv64)

package shm

// offmap supports Linux, macOS and Windows on 64-bit little-endian processors
// only (docs/PLATFORMS.md): shared file mappings, flock, and a way to tell
// whether a process still lives are what its cross-process locks,
// wake-ups and dead-process checks are built on; a map reserves more
// address space than a 32-bit process has; and the file formats are
// little-endian words read in place with atomic loads, which a big-endian
// processor would read byte-swapped. Built elsewhere, this is the one
// error the compiler reports.
var _ = offmap_supports_only_linux_darwin_windows_on_64bit_little_endian
