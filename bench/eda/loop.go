package eda

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/offmap/offmap/bench/latency"
	"github.com/offmap/offmap/queue"
)

// loop is an event loop: it releases the sends of some instances when
// they are due and serves the consumers of some topics, waiting for both
// at once. A message appended by one of its handlers makes the next
// topic's tailer ready at once, so a message usually crosses every topic
// a loop serves in one pass, with no goroutine woken per hop.
type loop struct {
	c       *chain
	shard   int
	batch   int64
	sched   *latency.Schedule
	sendTo  []*instance // by schedule id
	set     *queue.Set
	route   map[*queue.Tailer]route
	watched int // tailers in set
	ready   []*queue.Tailer
	buf     []byte
	pacer   *latency.Pacer // waits of a loop that watches no topic
}

type route struct {
	in *instance
	k  int // topic
}

func newLoop(c *chain, shard int, batch time.Duration) *loop {
	return &loop{
		c: c, shard: shard, batch: int64(batch),
		set:   queue.NewSet(),
		route: make(map[*queue.Tailer]route),
		buf:   make([]byte, 0, messageSize),
	}
}

// addSender makes the loop release instance in's sends.
func (l *loop) addSender(in *instance) {
	if l.sched == nil {
		l.sched = &latency.Schedule{}
	}
	l.sched.Add(l.c.plan.first(in.id), time.Duration(l.c.plan.Interval))
	l.sendTo = append(l.sendTo, in)
}

// addConsumer makes the loop serve topic k of instance in. When watch is
// false the loop does not wait for the topic: only its own handlers
// produce it, and they drain it at once.
func (l *loop) addConsumer(in *instance, k int, watch bool) error {
	t, ok := tailerOf(in.in[k])
	if !ok {
		return fmt.Errorf("%w: the loop wait mode needs offmap queues", ErrConfig)
	}
	l.route[t] = route{in, k}
	in.tailers[k] = t
	if watch {
		l.set.Add(t)
		l.watched++
	}
	return nil
}

// close stops watching the loop's tailers.
func (l *loop) close() {
	if l.watched > 0 {
		for t := range l.route {
			l.set.Remove(t)
		}
	}
	if l.pacer != nil {
		l.pacer.Close()
	}
}

const never = math.MaxInt64

// run serves until ctx is done.
func (l *loop) run(ctx context.Context) error {
	for ctx.Err() == nil {
		next, err := l.release()
		if err != nil {
			return err
		}
		if l.watched == 0 {
			// Nothing comes from elsewhere: sleep until the next release.
			if err := l.sleep(ctx, next); err != nil {
				return nil
			}
			continue
		}
		ready, err := l.set.WaitTimeout(ctx, l.ready[:0], 0)
		if err == nil && len(ready) == 0 {
			ready, err = l.set.WaitTimeout(ctx, l.ready[:0], l.until(next))
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.ready = ready
		if err := l.serve(ready); err != nil {
			return err
		}
	}
	return nil
}

// release sends every message due now and returns when the next is due.
func (l *loop) release() (int64, error) {
	if l.sched == nil || l.sched.Len() == 0 {
		return never, nil
	}
	end, now := l.c.plan.end(), latency.Nanotime()
	for {
		id, due := l.sched.Peek()
		if due >= end {
			return never, nil
		}
		if due > now {
			return due, nil
		}
		l.sched.Next()
		in := l.sendTo[id]
		l.prefetchAhead(id)
		if err := l.c.send(in, due, l.buf); err != nil {
			return 0, err
		}
		if l.watched == 0 && in.tailers[0] != nil {
			if err := l.follow(in); err != nil {
				return 0, err
			}
		}
	}
}

// follow takes the message just sent by instance in through its chain,
// topic by topic, when this loop alone produces and serves the chain: each
// topic then holds exactly that one new message, so the loop reads it and
// does not look for another (a look past the last message reads a fresh
// cache line, a miss per topic).
func (l *loop) follow(in *instance) error {
	for k := 0; k <= Services; k++ {
		_, msg, err := in.tailers[k].Next()
		if err != nil {
			if err == queue.ErrNoMessage {
				return fmt.Errorf("eda: instance %d: topic %d lost a message", in.id, k)
			}
			return err
		}
		if err := l.c.handle(in, k, msg, l.buf, l.shard); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits until the send due at next, on the batch grid, or until
// ctx is done.
func (l *loop) sleep(ctx context.Context, next int64) error {
	if next == never {
		<-ctx.Done()
		return ctx.Err()
	}
	if l.pacer == nil {
		l.pacer = latency.NewPacer(latency.PacerOptions{})
	}
	if l.batch > 0 {
		start := l.c.plan.Start
		next = start + (next-start+l.batch-1)/l.batch*l.batch
	}
	// Wake at least every 100 ms to notice ctx.
	l.pacer.WaitUntil(min(next, latency.Nanotime()+int64(100*time.Millisecond)))
	return ctx.Err()
}

// until is how long to wait for the send due at next: to the next point
// of the batch grid at or after it, so that the loop wakes at most once
// per batch.
func (l *loop) until(next int64) time.Duration {
	if next == never {
		return -1
	}
	if l.batch > 0 {
		start := l.c.plan.Start
		next = start + (next-start+l.batch-1)/l.batch*l.batch
	}
	return max(time.Duration(next-latency.Nanotime()), time.Microsecond)
}

// serve drains the ready tailers through their handlers.
func (l *loop) serve(ready []*queue.Tailer) error {
	for _, t := range ready {
		if err := l.drain(t, l.route[t]); err != nil {
			return err
		}
	}
	return nil
}

// drain handles every message of t. When the handler forwards a message
// to a topic this loop also serves, that topic is drained at once, depth
// first: the message crosses the chain while its cache lines are hot,
// instead of after every other instance's message of the batch.
func (l *loop) drain(t *queue.Tailer, r route) error {
	for {
		_, msg, err := t.Next()
		if err == queue.ErrNoMessage {
			return nil
		}
		if err != nil {
			return err
		}
		if err := l.c.handle(r.in, r.k, msg, l.buf, l.shard); err != nil {
			return err
		}
		// in.tailers holds only topics this loop serves.
		if r.k < Services {
			if next := r.in.tailers[r.k+1]; next != nil {
				if err := l.drain(next, route{r.in, r.k + 1}); err != nil {
					return err
				}
			}
		}
	}
}

// prefetchAhead, called as the send of schedule id goes out, prefetches
// for the instances the schedule visits next (it visits them in turn):
// the state of the one four ahead and, read from the state fetched two
// sends ago, where the one two ahead will append.
func (l *loop) prefetchAhead(id int) {
	n := len(l.sendTo)
	l.prefetchState(l.sendTo[(id+4)%n])
	l.prefetch(l.sendTo[(id+2)%n])
}

// prefetch starts bringing in what the chain of instance in will append to.
func (l *loop) prefetch(in *instance) {
	for _, p := range in.out {
		if pf, ok := p.(prefetcher); ok {
			pf.Prefetch()
		}
	}
}

// prefetchState starts bringing in the Go-side state of instance in's
// topics, a step before prefetch reads it.
func (l *loop) prefetchState(in *instance) {
	for k, p := range in.out {
		if pf, ok := p.(prefetcher); ok {
			pf.PrefetchState()
		}
		if t := in.tailers[k]; t != nil {
			t.Prefetch()
		}
	}
}
