package latency

import (
	"context"
	"time"
)

// Schedule holds the send times of many senders and hands them out in time
// order, so that one goroutine waiting on one Clock can pace them all: a
// thousand senders at 1,000 messages a second each need no thousand timers.
// Sender i's k-th send is due at first_i + k*every_i.
//
// When every sender has the same period and they were added in order of
// their first send time, within one period (NewStaggered does this), Next
// is a round-robin step; otherwise a binary heap orders them. The zero
// Schedule is empty and ready for Add. Not safe for concurrent use.
type Schedule struct {
	slots []slot // by id while round robin; a min-heap on due otherwise
	heap  bool
	next  int // round robin: the slot due next
}

type slot struct {
	due, every int64
	id         int
}

// NewStaggered returns a Schedule of n senders, each sending every period,
// spread evenly over the period from start: sender i first at
// start + i*period/n.
func NewStaggered(n int, start int64, period time.Duration) *Schedule {
	s := &Schedule{slots: make([]slot, 0, n)}
	for i := range n {
		s.Add(start+int64(period)*int64(i)/int64(n), period)
	}
	return s
}

// Add adds a sender whose first send is due at first and then every every
// (at least 1 ns); it returns the sender's id, counting from 0.
func (s *Schedule) Add(first int64, every time.Duration) int {
	id := len(s.slots)
	sl := slot{due: first, every: max(int64(every), 1), id: id}
	if !s.heap && id > 0 {
		head, last := s.slots[0], s.slots[id-1]
		if sl.every != head.every || sl.due < last.due || sl.due >= head.due+head.every || s.next != 0 {
			s.toHeap()
		}
	}
	s.slots = append(s.slots, sl)
	if s.heap {
		s.up(len(s.slots) - 1)
	}
	return id
}

// Len returns the number of senders.
func (s *Schedule) Len() int { return len(s.slots) }

// Peek returns the sender due next and its send time, without moving on.
// The Schedule must not be empty.
func (s *Schedule) Peek() (id int, due int64) {
	i := 0
	if !s.heap {
		i = s.next
	}
	return s.slots[i].id, s.slots[i].due
}

// Next returns the sender due next and its send time, and moves that
// sender on to its following send. The Schedule must not be empty.
func (s *Schedule) Next() (id int, due int64) {
	if !s.heap {
		sl := &s.slots[s.next]
		id, due = sl.id, sl.due
		sl.due += sl.every
		if s.next++; s.next == len(s.slots) {
			s.next = 0
		}
		return id, due
	}
	sl := &s.slots[0]
	id, due = sl.id, sl.due
	sl.due += sl.every
	s.down(0)
	return id, due
}

func (s *Schedule) toHeap() {
	s.heap = true
	for i := len(s.slots)/2 - 1; i >= 0; i-- {
		s.down(i)
	}
}

func (s *Schedule) less(i, j int) bool {
	a, b := &s.slots[i], &s.slots[j]
	return a.due < b.due || a.due == b.due && a.id < b.id
}

func (s *Schedule) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.slots[i], s.slots[p] = s.slots[p], s.slots[i]
		i = p
	}
}

func (s *Schedule) down(i int) {
	n := len(s.slots)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.slots[i], s.slots[m] = s.slots[m], s.slots[i]
		i = m
	}
}

// Drive paces every sender of s on c: it waits for the earliest send time,
// then calls send for every sender due by the time it woke, in time order,
// passing the scheduled time (so a late release is charged to the message,
// as coordinated-omission correction requires). It returns ctx.Err() when
// ctx is done, or nil when send returns false.
func Drive(ctx context.Context, c Clock, s *Schedule, send func(id int, due int64) bool) error {
	if s.Len() == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	done := ctx.Done()
	for {
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		_, due := s.Peek()
		now := c.WaitUntil(due)
		for {
			id, due := s.Peek()
			if due > now {
				break
			}
			s.Next()
			if !send(id, due) {
				return nil
			}
		}
	}
}
