//go:build linux && !offmap_portable

package shm

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxWaitv is the most futexes one FutexWaitv call can watch (a kernel
// limit).
const MaxWaitv = 128

// Waitv is one futex watched by FutexWaitv: the call returns when the
// word at Addr no longer holds Val. It has the kernel's struct futex_waitv
// layout.
type Waitv struct {
	Val      uint64
	addr     uint64
	flags    uint32
	reserved uint32
}

// futex2 flags: a 32-bit word, shared between processes (no PRIVATE).
const futex2SizeU32 = 0x02

// SetWord points the entry at w, expecting the value val.
func (v *Waitv) SetWord(w *atomic.Uint32, val uint32) {
	v.Val = uint64(val)
	v.addr = uint64(uintptr(unsafe.Pointer(w)))
	v.flags = futex2SizeU32
}

// FutexWaitv sleeps until one of the words in ws no longer holds its
// value, it is woken with FutexWake, a signal arrives, or timeout has
// passed (Linux 5.16 or later). The words may live in different
// processes' shared mappings or, for words only this process wakes, in
// ordinary memory that the caller keeps alive. It returns at once when a
// word already differs; callers re-check every word either way. ws holds
// at most MaxWaitv entries.
func FutexWaitv(ws []Waitv, timeout time.Duration) error {
	if len(ws) == 0 || len(ws) > MaxWaitv {
		return unix.EINVAL
	}
	// The kernel wants an absolute CLOCK_MONOTONIC deadline: derived from
	// Go's monotonic clock (the same clock, read without a system call).
	ts := unix.NsecToTimespec(monoAtStart + int64(time.Since(startTime)+timeout))
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX_WAITV, uintptr(unsafe.Pointer(&ws[0])),
		uintptr(len(ws)), 0, uintptr(unsafe.Pointer(&ts)), uintptr(unix.CLOCK_MONOTONIC), 0)
	switch errno {
	case 0, unix.EAGAIN, unix.EINTR, unix.ETIMEDOUT:
		return nil
	}
	return errno
}

// startTime and monoAtStart are one instant on Go's clock and on
// CLOCK_MONOTONIC.
var startTime, monoAtStart = func() (time.Time, int64) {
	var ts unix.Timespec
	now := time.Now()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return now, ts.Nano()
}()

// waitv records whether FutexWaitv works here, probed once.
var waitv struct {
	once     sync.Once
	ok       atomic.Bool
	disabled atomic.Bool
}

// WaitvMissing reports whether FutexWaitv fails here (ENOSYS: Linux
// before 5.16, a seccomp filter that refuses it, qemu-user 7.2), so that
// the queue's notifier polls its doorbells instead, each millisecond.
func WaitvMissing() bool {
	waitv.once.Do(func() {
		var w atomic.Uint32
		ws := []Waitv{{}}
		ws[0].SetWord(&w, 1) // differs: a kernel with the call returns at once
		waitv.ok.Store(FutexWaitv(ws, time.Second) == nil)
	})
	return !waitv.ok.Load() || waitv.disabled.Load()
}

// DisableWaitv makes WaitvMissing report true, so that tests and
// benchmarks run the fallback on a kernel that has the call.
func DisableWaitv() { waitv.disabled.Store(true) }

// WakeupMode says how a process sleeping on a queue is woken by another.
func WakeupMode() string {
	if WaitvMissing() {
		return "polled each 1 ms (no FUTEX_WAITV: Linux before 5.16, or a seccomp filter)"
	}
	return "futex_waitv"
}
