package eda

import (
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/bench/latency"
)

// A group is a block of instances whose sends one event loop, its owner,
// releases together. A loop that finds another loop's group overdue (its
// owner preempted by another task, or behind) releases the group's sends
// itself for that pass, so a CPU taken from one loop for a few
// milliseconds delays at most the group it was in the middle of, not
// every instance the loop owns. busy makes the loops exclusive: an
// instance's tailers and counts are used by one goroutine at a time, and
// the flag's atomic hand-over orders their uses.
type group struct {
	busy   atomic.Bool
	due    atomic.Int64 // when its next send is due; never when none is left
	sched  latency.Schedule
	sendTo []*instance // by schedule id
	follow bool        // whoever sends also takes each message down its chain (see loop.follow)
	_      [64]byte    // keeps groups owned by different loops off one cache line
}

// groupSize is how many instances a group holds for a loop that owns n:
// about 16 groups a loop, so that a stalled loop holds back a sixteenth of
// its instances, while the groups it checks each pass stay few.
func groupSize(n int) int { return max(1, (n+15)/16) }

// formGroups splits the instances added by addSender into groups, in
// order, and links each instance to those sent after it for prefetching.
func (l *loop) formGroups() {
	n := len(l.senders)
	size := groupSize(n)
	for i, in := range l.senders {
		in.ahead2, in.ahead3, in.ahead4 = l.senders[(i+2)%n], l.senders[(i+3)%n], l.senders[(i+4)%n]
		if i%size == 0 {
			l.own = append(l.own, &group{follow: l.watched == 0})
		}
		g := l.own[len(l.own)-1]
		g.sched.Add(l.c.plan.first(in.id), time.Duration(l.c.plan.Interval))
		g.sendTo = append(g.sendTo, in)
	}
	for _, g := range l.own {
		_, due := g.sched.Peek()
		g.due.Store(due)
	}
}

// shareGroups lets every loop take over the others' overdue groups.
func shareGroups(loops []*loop) {
	for _, l := range loops {
		for _, o := range loops {
			if o != l {
				l.peers = append(l.peers, o.own...)
			}
		}
	}
}

// stealAfter is how late a send of another loop's group must be before
// this loop releases it: later than the owner gets to it when it keeps up
// (it wakes once a batch and goes through its groups within a batch).
func (l *loop) stealAfter() int64 { return max(2*l.batch, int64(2*time.Millisecond)) }

// releaseGroup sends every message of g due by now (and follows each down
// its chain in a closed loop). It returns when g's next send is due, or
// busy (and no time) when another loop holds g.
func (l *loop) releaseGroup(g *group, now int64) (next int64, busy bool, err error) {
	if !g.busy.CompareAndSwap(false, true) {
		return never, true, nil
	}
	defer g.busy.Store(false)
	end := l.c.plan.end()
	for {
		id, due := g.sched.Peek()
		if due >= end {
			g.due.Store(never)
			return never, false, nil
		}
		if due > now {
			g.due.Store(due)
			return due, false, nil
		}
		g.sched.Next()
		in := g.sendTo[id]
		l.prefetchAhead(in)
		if err := l.c.send(in, due, l.buf); err != nil {
			return 0, false, err
		}
		if g.follow && in.tailers[0] != nil {
			if err := l.follow(in); err != nil {
				return 0, false, err
			}
		}
	}
}
