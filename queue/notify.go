package queue

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// The notifier of a process watches the doorbells of every queue that has
// a blocked tailer in this process, with FUTEX_WAITV: one goroutine (and
// so one thread, blocked in the kernel) per MaxWaitv-1 doorbells, not one
// per tailer. When a doorbell changes it clears the pending bit and wakes
// the queue's listeners, which check for data themselves.
type notifier struct {
	mu     sync.Mutex
	shards []*shard
}

var procNotifier notifier

// shard is one notifier goroutine and the doorbells it watches. Its
// control word (ordinary memory) is bumped to make it rebuild its list.
type shard struct {
	ctrl  atomic.Uint32
	mu    sync.Mutex
	qs    []*Queue
	base  []uint32 // last doorbell value seen per queue
	count int      // len(qs), read under notifier.mu

	sizes    []sizeCheck // checkSizes' scratch, run's goroutine only
	sleepers []sleeper
}

const shardCap = shm.MaxWaitv - 1

// bellRecheck bounds a watcher's sleep. An appender killed between making
// the doorbell odd and its FUTEX_WAKE leaves watchers asleep with a wake-up
// pending that later appends do not send at once (they see the doorbell
// odd; see Queue.ring); a watcher that wakes on its own sees the changed
// doorbell, clears it and wakes its tailers. Each such wake-up costs the
// kernel a re-arm of up to 128 shared futexes (about 250 us of CPU for a
// full shard), so it is rare; tests shorten it. The same round checks the
// cycle files of the tailers asleep in Block (checkSizes).
var bellRecheck = time.Second

func (n *notifier) watch(q *Queue, base uint32) {
	n.mu.Lock()
	var s *shard
	for _, x := range n.shards {
		if x.count < shardCap {
			s = x
			break
		}
	}
	if s == nil {
		s = &shard{}
		n.shards = append(n.shards, s)
		go s.run()
	}
	s.count++
	n.mu.Unlock()
	s.mu.Lock()
	s.qs = append(s.qs, q)
	s.base = append(s.base, base)
	s.mu.Unlock()
	q.wake.shard = s
	s.kick()
}

// unwatch stops watching q. After it returns the shard no longer reads
// q's doorbell, so q's metadata file may be unmapped.
func (n *notifier) unwatch(q *Queue, s *shard) {
	if s == nil {
		return
	}
	s.mu.Lock()
	for i, x := range s.qs {
		if x == q {
			last := len(s.qs) - 1
			s.qs[i], s.base[i] = s.qs[last], s.base[last]
			s.qs[last] = nil
			s.qs, s.base = s.qs[:last], s.base[:last]
			break
		}
	}
	s.mu.Unlock()
	n.mu.Lock()
	s.count--
	n.mu.Unlock()
	s.kick()
}

func (s *shard) kick() {
	s.ctrl.Add(1)
	shm.FutexWake(&s.ctrl, 1)
}

func (s *shard) run() {
	var vec []shm.Waitv
	var changed []*Queue
	checkAt := mono() + int64(bellRecheck)
	for {
		s.mu.Lock()
		vec = vec[:0]
		vec = append(vec, shm.Waitv{})
		vec[0].SetWord(&s.ctrl, s.ctrl.Load())
		for i, q := range s.qs {
			vec = append(vec, shm.Waitv{})
			vec[len(vec)-1].SetWord(q.bell, s.base[i])
		}
		s.mu.Unlock()
		// A doorbell unmapped meanwhile makes the call fail (EFAULT)
		// or sleep until the kick that unwatch sends: both are fine.
		if shm.WaitvMissing() {
			// No FUTEX_WAITV (a kernel before 5.16, a seccomp filter):
			// poll. Wake-ups within the process stay immediate
			// (notify fires this process's listeners itself).
			time.Sleep(time.Millisecond)
		} else if err := shm.FutexWaitv(vec, untilCheck(checkAt)); err != nil {
			// A doorbell unmapped meanwhile: poll instead of spinning.
			time.Sleep(time.Millisecond)
		}
		s.mu.Lock()
		changed = changed[:0]
		for i, q := range s.qs {
			if q.bell.Load() != s.base[i] {
				s.base[i] = clearBell(q.bell)
				changed = append(changed, q)
			}
		}
		s.mu.Unlock()
		if now := mono(); now >= checkAt {
			checkAt = now + int64(bellRecheck)
			s.checkSizes()
		}
		for i, q := range changed {
			if l := q.wake.list.Load(); l != nil {
				for _, x := range *l {
					x.fire()
				}
			}
			q.wake.idleWake(q)
			changed[i] = nil
		}
		if len(changed) > 0 {
			// Let the woken tailers run on this thread now, rather than
			// leave them to a second thread that must itself be woken:
			// halves the CPU of a wake-up and shortens it.
			runtime.Gosched()
		}
	}
}

// untilCheck is the wait until the round due at checkAt: never zero or
// less, which FutexWaitv's polling fallback would take for no limit.
func untilCheck(checkAt int64) time.Duration {
	return time.Duration(max(checkAt-mono(), 1))
}

// checkSizes wakes the tailers asleep in Block whose cycle file became
// shorter than this process mapped (files only grow: someone truncated
// it, and reading on would fault); each woken tailer checks again itself
// and returns ErrTruncated. One fstat per cycle file, on this thread,
// instead of a timer and a wake-up per tailer. The list is read under
// s.mu, so that no queue is unwatched and unmapped meanwhile, and a
// reference keeps each cycle mapped and its file open until it was
// looked at.
func (s *shard) checkSizes() {
	s.mu.Lock()
	for _, q := range s.qs {
		p := q.wake.list.Load()
		if p == nil {
			continue
		}
		for _, l := range *p {
			c := l.sleepOn.Load()
			if c == nil {
				continue
			}
			if n := len(s.sizes); n == 0 || s.sizes[n-1].c != c {
				if !c.tryRef() {
					continue
				}
				s.sizes = append(s.sizes, sizeCheck{c: c})
			}
			s.sleepers = append(s.sleepers, sleeper{l, len(s.sizes) - 1})
		}
	}
	s.mu.Unlock()
	for i := range s.sizes {
		x := &s.sizes[i]
		x.cut = x.c.checkSize() != nil
		x.c.release()
		x.c = nil
	}
	for i, x := range s.sleepers {
		if s.sizes[x.size].cut {
			x.l.cut.Store(true)
			x.l.fire()
		}
		s.sleepers[i].l = nil
	}
	s.sizes, s.sleepers = s.sizes[:0], s.sleepers[:0]
}

// sizeCheck and sleeper are checkSizes' lists: the cycles it looks at,
// and the tailers asleep on each.
type sizeCheck struct {
	c   *cycle
	cut bool
}

type sleeper struct {
	l    *listener
	size int // index in sizes
}

// notify wakes the listeners of this process and, through the doorbell,
// those of other processes (steps in docs/QUEUE-FORMAT.md). Nothing is
// done, and no system call made, when nobody waits.
func (q *Queue) notify() {
	if l := q.wake.list.Load(); l != nil {
		for _, x := range *l {
			x.fire()
		}
	}
	if s := q.sleepers.Load(); s > 1 || s == 1 && !q.wake.armed.Load() {
		q.ring()
	}
}

// ring makes the doorbell odd and wakes its watchers; while it is odd
// (a wake-up pending, not yet seen) later appends skip the system call.
//
// A ringer killed between its CAS and FUTEX_WAKE leaves the doorbell odd
// and its watchers asleep. Two things wake them: an appender that finds
// the same odd value staleRings times in a row wakes them itself (a live
// watcher clears the doorbell within tens of microseconds, long before),
// and without appends, each watcher looks on its own every bellRecheck.
func (q *Queue) ring() {
	b := q.bell.Load()
	if b&1 == 0 {
		if q.bell.CompareAndSwap(b, b+1) {
			shm.FutexWake(q.bell, math.MaxInt32)
		}
		return
	}
	// Plain loads and stores, not read-modify-writes: racing appenders
	// may lose a count, which only delays the rescue a little.
	if q.pendingBell.Load() != b {
		q.pendingBell.Store(b)
		q.pendingRuns.Store(1)
		return
	}
	if n := q.pendingRuns.Load() + 1; n < staleRings {
		q.pendingRuns.Store(n)
		return
	}
	q.pendingRuns.Store(0)
	shm.FutexWake(q.bell, math.MaxInt32)
}

// staleRings is how many appends of one process in a row may find the
// same wake-up pending before it sends the wake-up itself.
const staleRings = 1024

// clearBell makes a pending doorbell even again and returns its value.
func clearBell(bell *atomic.Uint32) uint32 {
	for {
		b := bell.Load()
		if b&1 == 0 || bell.CompareAndSwap(b, b+1) {
			return bell.Load() &^ 1
		}
	}
}
