package queue

import (
	"context"
	"slices"
	"time"
)

// WatchCycles reports the cycle files that any process creates or
// deletes, for a process that only reads (Options.OnCycle reports what
// this process does itself). It first calls fn with a CycleCreated event
// for each cycle file present, then with a CycleCreated or CycleDeleted
// event for each change, in cycle order, until ctx is done or the queue
// is closed, and returns ctx's error (or ErrClosed). It lists the queue's
// directory every interval (zero means 100 ms): a change is reported
// within about that, and a cycle created and deleted between two looks is
// not reported.
func (q *Queue) WatchCycles(ctx context.Context, interval time.Duration, fn func(CycleEvent)) error {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	var seen []uint32
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if q.closed.Load() {
			return ErrClosed
		}
		now, err := q.listCycles()
		if err != nil {
			return err
		}
		for _, e := range diffCycles(seen, now) {
			fn(CycleEvent{Kind: e.kind, Cycle: e.n, Path: q.cyclePath(e.n)})
		}
		seen = now
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

type cycleChange struct {
	kind CycleEventKind
	n    uint32
}

// diffCycles returns what changed from the sorted cycle list before to
// the sorted list after: deletions first (retention removes the oldest),
// then creations, each in cycle order.
func diffCycles(before, after []uint32) []cycleChange {
	var out []cycleChange
	for _, n := range before {
		if _, ok := slices.BinarySearch(after, n); !ok {
			out = append(out, cycleChange{CycleDeleted, n})
		}
	}
	for _, n := range after {
		if _, ok := slices.BinarySearch(before, n); !ok {
			out = append(out, cycleChange{CycleCreated, n})
		}
	}
	return out
}
