//go:build darwin || windows || (linux && offmap_portable)

package shm

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Cross-process waits without a futex. macOS has no futex that Go can
// call without cgo: os_sync_wait_on_address (macOS 14.4 and later) and
// __ulock_wait live in libSystem, which this module reaches only through
// golang.org/x/sys's wrappers, and those offer neither; calling them
// would take cgo or a go:linkname into the runtime's libcall machinery,
// and the module stays cgo-free. So a waiter polls the words it waits on,
// from PollMin doubling to PollMax between looks, and a waker writes the
// word and needs to do nothing more. Wakes within a process are
// immediate: FutexWake wakes every waiter of the process at once, which
// re-checks its words (a spurious wake-up is allowed by the callers).
//
// The cost, measured in docs/BENCHMARKS.md: a waiter asleep for long
// looks PollMax apart, which is both the worst wake-up latency across
// processes and the idle CPU (one timer wake-up per PollMax for all the
// words of a FutexWaitv). On Linux, Go's timers sleep at least about a
// millisecond (the netpoller waits in whole milliseconds), so looks come
// no closer than that there.

// Portable reports whether this build uses the portable fallbacks
// (darwin, or Linux built with the offmap_portable tag).
const Portable = true

// MaxWaitv is the most words one FutexWaitv call can watch. Polling has no
// kernel limit; the bound keeps one look at all of them short (about a
// microsecond per thousand words).
const MaxWaitv = 4096

// PollMin and PollMax bound the pause between looks of a polling wait.
const (
	PollMin = 50 * time.Microsecond
	PollMax = 2 * time.Millisecond
)

// Waitv is one word watched by FutexWaitv: the call returns when the word
// no longer holds Val.
type Waitv struct {
	Val uint64
	w   *atomic.Uint32
}

// SetWord points the entry at w, expecting the value val.
func (v *Waitv) SetWord(w *atomic.Uint32, val uint32) {
	v.Val = uint64(val)
	v.w = w
}

// FutexWait sleeps while *w == val, for at most timeout (no limit if
// timeout <= 0). It returns early on a wake from this process or when the
// value differs; callers re-check their condition either way.
func FutexWait(w *atomic.Uint32, val uint32, timeout time.Duration) {
	poll(timeout, func() bool { return w.Load() != val })
}

// FutexWake wakes the waiters of this process; those of other processes
// see the changed word at their next look. n is ignored.
func FutexWake(w *atomic.Uint32, n int) {
	if local.waiting.Load() == 0 {
		return
	}
	local.mu.Lock()
	if local.ch != nil {
		close(local.ch)
		local.ch = nil
	}
	local.mu.Unlock()
}

var errWaitv = errors.New("shm: FutexWaitv of no words or of more than MaxWaitv")

// FutexWaitv sleeps until one of the words in ws no longer holds its
// value, a FutexWake of this process, or timeout has passed. It returns at
// once when a word already differs; callers re-check every word either
// way. ws holds at most MaxWaitv entries.
//
// The words are read here, not by a kernel that answers EFAULT for an
// unmapped one, so a caller that stops watching a word and unmaps it must
// first change a word before it in ws and wake (the queue's notifier
// bumps its control word, ws[0], and calls FutexWake): a look stops at the
// first changed word, and Mapping.Unmap waits for a look in progress.
func FutexWaitv(ws []Waitv, timeout time.Duration) error {
	if len(ws) == 0 || len(ws) > MaxWaitv {
		return errWaitv
	}
	poll(timeout, func() bool {
		looks.RLock()
		defer looks.RUnlock()
		for i := range ws {
			if uint64(ws[i].w.Load()) != ws[i].Val {
				return true
			}
		}
		return false
	})
	return nil
}

// looks is held (shared) while a FutexWaitv reads its words; an unmap
// takes it alone, so that no look is halfway through the mapping.
var looks sync.RWMutex

// waitLooks returns when no look that started before it is reading words.
func waitLooks() {
	looks.Lock()
	looks.Unlock() //nolint:staticcheck // an empty critical section: a barrier
}

// local is how FutexWake reaches the waiters of this process: a channel
// they all select on, closed by a wake and made anew by the next waiter.
var local struct {
	waiting atomic.Int32
	mu      sync.Mutex
	ch      chan struct{}
}

// poll returns when changed reports true, at a wake of this process, or
// after timeout (never, if timeout <= 0). A waker changes its word and
// then reads local.waiting; a waiter counts itself in local.waiting and
// takes the channel before it looks at its words: so either the waiter
// sees the change or the waker closes its channel.
func poll(timeout time.Duration, changed func() bool) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	local.waiting.Add(1)
	defer local.waiting.Add(-1)
	local.mu.Lock()
	if local.ch == nil {
		local.ch = make(chan struct{})
	}
	ch := local.ch
	local.mu.Unlock()
	var t *time.Timer
	for nap := PollMin; ; nap = min(2*nap, PollMax) {
		if changed() {
			return
		}
		d := nap
		if timeout > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return
			}
			d = min(d, left)
		}
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		} else {
			t.Reset(d)
		}
		select {
		case <-ch:
			return
		case <-t.C:
		}
	}
}

// WaitvMissing reports false: the polling FutexWaitv always works.
func WaitvMissing() bool { return false }

// DisableWaitv does nothing: the portable build always polls.
func DisableWaitv() {}

// WakeupMode says how a process sleeping on a queue is woken by another.
func WakeupMode() string { return "polled each 50 us to 2 ms (portable build)" }
