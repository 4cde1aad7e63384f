//go:build linux && !offmap_portable

package shm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Portable reports whether this build uses the portable fallbacks
// (darwin, or Linux built with the offmap_portable tag).
const Portable = false

// Futex operations on a 32-bit word in a shared file mapping. The PRIVATE
// flag is deliberately absent: waiters and wakers live in different
// processes.
const (
	futexWait = 0
	futexWake = 1
)

// FutexWait sleeps while *w == val, for at most timeout (no limit if
// timeout <= 0). It returns early on a wake, on a signal or when the value
// already differs; callers re-check their condition either way.
func FutexWait(w *atomic.Uint32, val uint32, timeout time.Duration) {
	var ts *unix.Timespec
	if timeout > 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait,
		uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
}

// FutexWake wakes up to n processes or threads sleeping on w.
func FutexWake(w *atomic.Uint32, n int) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake,
		uintptr(n), 0, 0, 0)
}

// waitLooks: the kernel reads the words of a futex wait itself, and
// answers EFAULT for an unmapped one; nothing to wait for.
func waitLooks() {}
