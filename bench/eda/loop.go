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
	senders []*instance // whose sends it releases, in order of send time
	own     []*group    // the senders, in blocks (formGroups)
	peers   []*group    // other loops' groups, released when overdue
	set     *queue.WaitSet
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
		set:   queue.NewWaitSet(),
		route: make(map[*queue.Tailer]route),
		buf:   make([]byte, 0, messageSize),
	}
}

// addSender makes the loop release instance in's sends; formGroups must
// follow the last call.
func (l *loop) addSender(in *instance) { l.senders = append(l.senders, in) }

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

// release sends every message of the loop's groups due now, then those of
// other loops' groups that are overdue, and returns when it should next
// look: when a send of its own groups is due, or a send of another loop's
// group would be overdue.
func (l *loop) release() (int64, error) {
	next := int64(never)
	again := max(l.batch, int64(time.Millisecond)) // look at a busy group again
	for _, g := range l.own {
		due, busy, err := l.releaseGroup(g, latency.Nanotime())
		if err != nil {
			return 0, err
		}
		if busy {
			due = latency.Nanotime() + again
		}
		next = min(next, due)
	}
	late := l.stealAfter()
	for _, g := range l.peers {
		due, now := g.due.Load(), latency.Nanotime()
		if due == never {
			continue
		}
		if due <= now-late {
			d, busy, err := l.releaseGroup(g, now)
			switch {
			case err != nil:
				return 0, err
			case busy:
				// Its owner or another loop is on it: look again later.
				next = min(next, now+again)
				continue
			case d == never:
				continue
			}
			due = d
		}
		next = min(next, max(due+late, now+again))
	}
	return next, nil
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

// prefetchAhead, called as instance in's send goes out, prefetches for
// the instances sent next (a loop visits its instances in turn), a step
// each: for the one four ahead the state of its queues and tailers, for
// the one three ahead (its queues' state now in cache) the cycles they
// append to, and for the one two ahead (the cycles now in cache) where
// its messages and counts will be written. No step waits for a miss of
// its own.
func (l *loop) prefetchAhead(in *instance) {
	for k, q := range in.ahead4.queues {
		if q != nil {
			q.PrefetchState()
		}
		if t := in.ahead4.tailers[k]; t != nil {
			t.Prefetch()
		}
	}
	for _, q := range in.ahead3.queues {
		if q != nil {
			q.PrefetchCycle()
		}
	}
	for _, q := range in.ahead2.queues {
		if q != nil {
			q.PrefetchAppend()
		}
	}
	for _, h := range in.ahead2.counters {
		h.Prefetch()
	}
}
