package queue

import (
	"errors"
	"fmt"
	"os"

	"github.com/offmap/offmap/internal/shm"
)

// DeleteCycles deletes every cycle file but the newest keep (at least
// one, the cycle being appended to), sparing the cycles that a named
// tailer has not acknowledged past, unless force is set. It returns the
// cycles deleted. This process unmaps the deleted files it is not reading;
// other processes that still map one keep reading it. Tailers that reach a
// deleted cycle later go on from the next cycle that exists.
func (q *Queue) DeleteCycles(keep int, force bool) ([]uint32, error) {
	if q.readOnly {
		return nil, ErrReadOnly
	}
	if q.closed.Load() {
		return nil, ErrClosed
	}
	cs, err := q.listCycles()
	if err != nil {
		return nil, err
	}
	keep = max(keep, 1)
	if len(cs) <= keep {
		return nil, nil
	}
	limit := cs[len(cs)-keep] // delete cycles below this one
	if latest := q.latest.Load(); latest != 0 {
		limit = min(limit, uint32(latest-1))
	}
	if !force {
		if acked, ok := q.minAcked(); ok {
			limit = min(limit, acked)
		}
	}
	var deleted []uint32
	var errs []error
	for _, n := range cs {
		if n >= limit {
			break
		}
		if err := shm.Remove(q.cyclePath(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, n)
		q.forget(n)
		q.event(CycleDeleted, n)
	}
	if len(errs) > 0 {
		return deleted, fmt.Errorf("queue: delete cycles: %w", errors.Join(errs...))
	}
	return deleted, nil
}

// minAcked returns the lowest cycle that a named tailer still needs: the
// cycle of its acknowledged position, or 0 when it acknowledged nothing.
func (q *Queue) minAcked() (uint32, bool) {
	found := false
	lowest := uint32(maxCycle)
	for i := 0; i < maxNamedTailers; i++ {
		if q.tailerWord(i, 0).Load() == 0 {
			continue
		}
		found = true
		acked := q.tailerWord(i, 8).Load()
		c := uint32(0)
		if acked != 0 {
			c = uint32((acked - 1) >> 32)
		}
		lowest = min(lowest, c)
	}
	return lowest, found
}

// forget drops cycle n from this process's mapping cache, so that no
// tailer of the process reads the deleted file from it. A cycle in use
// stays mapped for its users; the last release unmaps it.
func (q *Queue) forget(n uint32) {
	q.mu.Lock()
	c := q.cycles[n]
	if c == nil {
		q.mu.Unlock()
		return
	}
	delete(q.cycles, n)
	// Only a cycle on the idle list is unmapped here. A zero count alone
	// is not enough: a release that just dropped the last reference may be
	// waiting for q.mu, and it unmaps a forgotten cycle itself.
	idle := q.unidle(c)
	q.mu.Unlock()
	if idle {
		c.unmap()
	}
}
