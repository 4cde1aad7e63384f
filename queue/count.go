package queue

import (
	"errors"
	"os"
)

// Count returns the number of messages with an index in [from, to): the
// sequence numbers taken in the cycle files that exist, whatever cycles
// the range spans. A cycle deleted by retention counts nothing, so a count
// that starts before the first cycle on disk counts only what retention
// kept. Every slot that took a sequence number counts: a message still
// being written, and a slot skipped after its writer died, count too. A
// range with from >= to, and one past the last message, counts 0; to may
// be math.MaxUint64 for "up to the end". A cycle file in the range that
// cannot be read (damaged, truncated while in use) is an error.
//
// Count reads no message: for each cycle in the range it finds where its
// slots end from the write hint, checked against the sparse index (at
// most IndexSpacing headers and a page of slots), and lists the
// directory when the range spans cycles before the latest. While appends
// go on, each cycle is counted at its own instant.
func (q *Queue) Count(from, to uint64) (int64, error) {
	if q.closed.Load() {
		return 0, ErrClosed
	}
	if from >= to {
		return 0, nil
	}
	latest := q.latest.Load()
	if latest == 0 {
		return 0, nil
	}
	last := uint32(latest - 1)
	fc, _ := SplitIndex(from)
	tc, _ := SplitIndex(to)
	if fc > last {
		return 0, nil
	}
	if fc == tc || fc == last {
		// One cycle: no listing of the directory.
		return q.countIn(fc, from, to)
	}
	cs, err := q.listCycles()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cs {
		if c < fc || c > tc || Index(c, 0) >= to {
			continue // outside the range: not read
		}
		k, err := q.countIn(c, from, to)
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

// countIn counts the sequence numbers of cycle n with an index in
// [from, to); a cycle file that does not exist counts 0.
func (q *Queue) countIn(n uint32, from, to uint64) (int64, error) {
	c, _, err := q.acquire(n, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer c.release()
	return c.countRange(from, to)
}

// countRange counts the sequence numbers of c with an index in [from,
// to), up to where its slots end.
func (c *cycle) countRange(from, to uint64) (int64, error) {
	end, _, err := c.end()
	if err != nil && err != errEOF {
		return 0, err
	}
	return seqsIn(c.num, end, from, to), nil
}

// seqsIn counts the indexes in [from, to) of a cycle n whose slots end at
// sequence number end.
func seqsIn(n, end uint32, from, to uint64) int64 {
	lo := max(from, Index(n, 0))
	hi := min(to, Index(n, end))
	if hi <= lo {
		return 0
	}
	return int64(hi - lo)
}

// Lag returns the number of messages after the tailer's position (the
// index Index returns) up to the end of the queue, counted as Count counts
// them: messages still being written count too. When the tailer is in the
// latest cycle, as one that keeps up is, it reads only that cycle's
// headers near its end and allocates nothing.
func (t *Tailer) Lag() (int64, error) {
	if t.closed {
		return 0, ErrClosed
	}
	if c := t.c; c != nil && t.q.latest.Load() == uint64(c.num)+1 {
		return c.countRange(Index(c.num, t.seq), maxIndex)
	}
	return t.q.Count(t.Index(), maxIndex)
}

// maxIndex is past every index.
const maxIndex = ^uint64(0)
