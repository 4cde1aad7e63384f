package eda

import (
	"context"
	"sync"
	"time"

	"github.com/offmap/offmap/bench/latency"
)

// pacer releases the sends of instances from one goroutine, at most once
// per batch, charging each message its scheduled time.
func (c *chain) pacer(ctx context.Context, senders []*instance, batch time.Duration) error {
	sched := &latency.Schedule{}
	for _, in := range senders {
		sched.Add(c.plan.first(in.id), time.Duration(c.plan.Interval))
	}
	clock := &batchClock{p: latency.NewPacer(latency.PacerOptions{}), start: c.plan.Start, batch: int64(batch)}
	defer clock.p.Close()
	end := c.plan.end()
	buf := make([]byte, 0, messageSize)
	var err error
	derr := latency.Drive(ctx, clock, sched, func(id int, due int64) bool {
		if due >= end {
			return false
		}
		err = c.send(senders[id], due, buf)
		return err == nil
	})
	if err != nil {
		return err
	}
	if derr == ctx.Err() {
		return nil
	}
	return derr
}

// batchClock wakes at most once per batch: a wait ends at the next point
// of the batch grid, which starts at start.
type batchClock struct {
	p            *latency.Pacer
	start, batch int64
}

func (b *batchClock) Now() int64 { return b.p.Now() }

func (b *batchClock) WaitUntil(t int64) int64 {
	if b.batch > 0 {
		t = b.start + (t-b.start+b.batch-1)/b.batch*b.batch
	}
	return b.p.WaitUntil(t)
}

// consume runs one consumer goroutine per topic served: Park polls and
// sleeps for 1/8 of the inter-message time when the topic is empty (the
// study's loop); Block waits in the topic.
func (c *chain) consume(ctx context.Context, wg *sync.WaitGroup, errs chan<- error, mode WaitMode, in *instance, k int) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 0, messageSize)
		nap := time.Duration(c.plan.Interval / 8)
		cons := in.in[k]
		for ctx.Err() == nil {
			msg, ok, err := cons.Poll()
			if err != nil {
				errs <- err
				return
			}
			if ok {
				if err := c.handle(in, k, msg, buf, -1); err != nil {
					errs <- err
					return
				}
				continue
			}
			if mode == Park {
				time.Sleep(nap)
			} else if err := cons.Wait(ctx); err != nil && ctx.Err() == nil {
				errs <- err
				return
			}
		}
	}()
}
