package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// WaitSet watches many tailers, possibly of many queues, for an event loop
// that serves them all from one goroutine: Wait blocks until some of them
// have messages and returns those. Appends in this process mark the
// queue ready directly; appends in other processes through the doorbell
// and the process's notifier. Add and Remove may be called from any
// goroutine; Wait from one at a time.
type WaitSet struct {
	mu       sync.Mutex
	entries  map[*Queue]*setEntry
	ready    []*setEntry // queues notified since the last Wait
	spare    []*setEntry
	last     []*Tailer // returned by the last Wait: checked again
	stalled  []*Tailer // at a message whose writer may have died
	mark     uint64
	ch       chan struct{}
	timer    *time.Timer
	deadline *time.Timer   // WaitTimeout's
	skip     time.Duration // shortest SkipAfter of the stalled tailers
}

// setEntry is a WaitSet's listener on one queue.
type setEntry struct {
	set     *WaitSet
	q       *Queue
	tailers []*Tailer // guarded by set.mu
	queued  atomic.Bool
	l       listener
}

// NewWaitSet returns an empty set.
func NewWaitSet() *WaitSet {
	return &WaitSet{entries: make(map[*Queue]*setEntry), ch: make(chan struct{}, 1)}
}

// Add starts watching t. A tailer belongs to at most one set; remove it
// before closing it.
func (s *WaitSet) Add(t *Tailer) {
	s.mu.Lock()
	e := s.entries[t.q]
	if e == nil {
		e = &setEntry{set: s, q: t.q}
		e.l.entry = e
		s.entries[t.q] = e
	}
	e.tailers = append(e.tailers, t)
	t.setEntry = e
	first := len(e.tailers) == 1
	s.mu.Unlock()
	if first {
		t.q.wake.add(t.q, &e.l)
	}
	e.notify() // it may have data already
}

// Remove stops watching t.
func (s *WaitSet) Remove(t *Tailer) {
	s.mu.Lock()
	e := s.entries[t.q]
	if e == nil {
		s.mu.Unlock()
		return
	}
	for i, x := range e.tailers {
		if x == t {
			e.tailers = append(e.tailers[:i], e.tailers[i+1:]...)
			t.setEntry = nil
			break
		}
	}
	for i, x := range s.last {
		if x == t {
			s.last = append(s.last[:i], s.last[i+1:]...)
			break
		}
	}
	empty := len(e.tailers) == 0
	if empty {
		delete(s.entries, t.q)
	}
	s.mu.Unlock()
	if empty {
		t.q.wake.remove(&e.l)
	}
}

func (e *setEntry) notify() {
	if !e.queued.CompareAndSwap(false, true) {
		return
	}
	s := e.set
	s.mu.Lock()
	s.ready = append(s.ready, e)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// Wait blocks until at least one tailer of the set has a message (or
// met an error reading), appends those tailers to dst[:0] and returns
// it. Tailers returned and not drained are returned again by the next
// Wait. A tailer whose cycle file was truncated underneath is returned
// within about a second, and its next read returns ErrTruncated. It
// allocates nothing once dst and the set's lists have grown.
func (s *WaitSet) Wait(ctx context.Context, dst []*Tailer) ([]*Tailer, error) {
	return s.WaitTimeout(ctx, dst, -1)
}

// WaitTimeout is Wait that gives up after timeout, returning no tailers
// and a nil error; a zero timeout only polls, a negative one waits
// without limit. An event loop that also has timed work (sends due at
// set times) waits with it.
func (s *WaitSet) WaitTimeout(ctx context.Context, dst []*Tailer, timeout time.Duration) ([]*Tailer, error) {
	dst = dst[:0]
	var expired <-chan time.Time
	if timeout > 0 {
		if s.deadline == nil {
			s.deadline = time.NewTimer(timeout)
		} else {
			s.deadline.Reset(timeout)
		}
		defer s.deadline.Stop()
		expired = s.deadline.C
	}
	for {
		s.mu.Lock()
		s.mark++
		mark := s.mark
		stalled := s.stalled
		s.stalled, s.skip = s.stalled[:0], 0
		ready := s.ready
		s.ready, s.spare = s.spare[:0], ready
		for _, e := range ready {
			e.queued.Store(false) // before cut: a cut found later queues e again
			if e.l.cut.Swap(false) {
				for _, t := range e.tailers {
					findCut(t)
				}
			}
		}
		for _, t := range s.last {
			dst = s.check(dst, t, mark)
		}
		for _, t := range stalled {
			dst = s.check(dst, t, mark)
		}
		for _, e := range ready {
			for _, t := range e.tailers {
				dst = s.check(dst, t, mark)
			}
		}
		clear(ready)
		s.last = append(s.last[:0], dst...)
		var stall <-chan time.Time
		if len(s.stalled) > 0 {
			// No append will come to wake a tailer at a dead writer's
			// message: look again when SkipAfter has passed.
			if s.timer == nil {
				s.timer = time.NewTimer(s.skip)
			} else {
				s.timer.Reset(s.skip)
			}
			stall = s.timer.C
		}
		s.mu.Unlock()
		if len(dst) > 0 || timeout == 0 {
			return dst, nil
		}
		select {
		case <-s.ch:
		case <-stall:
		case <-expired:
			return dst, nil
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

func (s *WaitSet) check(dst []*Tailer, t *Tailer, mark uint64) []*Tailer {
	if t.setMark == mark {
		return dst
	}
	t.setMark = mark
	if t.found != nil {
		return append(dst, t)
	}
	if _, err := t.peek(); err != ErrNoMessage {
		return append(dst, t)
	}
	if e := t.setEntry; e != nil && e.l.sleepOn.Load() != t.c {
		// The cycle an idle tailer of the entry waits at, for the
		// notifier's size check (shard.checkSizes): idle tailers of
		// one queue all wait at its last cycle.
		e.l.sleepOn.Store(t.c)
	}
	if t.stalled() {
		s.stalled = append(s.stalled, t)
		if d := t.q.opts.SkipAfter; s.skip == 0 || d < s.skip {
			s.skip = d
		}
	}
	return dst
}

// findCut checks t's cycle file once the notifier found it shorter than
// mapped: a truncation found is returned by the tailer's next read, and
// the tailer by Wait.
func findCut(t *Tailer) {
	if err := t.checkFile(); err != nil {
		t.found, t.endOK = err, -1
	}
}
