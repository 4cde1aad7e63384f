package queue

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Stats describes a queue.
type Stats struct {
	Dir           string
	FormatVersion int
	Roll          RollCycle
	IndexSpacing  int
	MaxCycleSize  int64
	Created       time.Time
	// ChecksumMessages: every message carries a checksum
	// (Options.ChecksumMessages).
	ChecksumMessages bool
	Cycles           []CycleStats
	Writers          []int // pids holding a writer lease
	Tailers          []TailerStats
	Watchers         int // processes watching the doorbell
	// Wakeups says how this process, asleep in Wait, is woken by an
	// append in another: "futex_waitv", or a poll and why.
	Wakeups string
	// SkippedSlots counts the slots tailers of every process skipped
	// because their writer died before committing them, since the queue
	// was made (a counter in queue.meta; 0 where no build that counts
	// them has written the queue). Each such slot takes an index.
	SkippedSlots uint64
}

// CycleStats describes one cycle file.
type CycleStats struct {
	Cycle     uint32
	Path      string
	Created   time.Time // when the file was made, by its header
	FileSize  int64
	Messages  uint32 // index of the next message: messages and skipped slots
	BytesUsed int64  // slot bytes up to the end
	Sealed    bool   // rolled over: no more messages will come
	Err       error  // the file could not be read
}

// TailerStats describes a named tailer.
type TailerStats struct {
	Name  string
	Acked uint64 // index after the last acknowledged message
	Any   bool   // false: nothing acknowledged yet
	// Lag is the number of messages after Acked (after the start of the
	// queue when nothing was acknowledged), as Queue.Count counts them,
	// from the cycles as Stats read them for Cycles; -1 when one of them
	// could not be read.
	Lag int64
	// LagBytes is the bytes of the slots after Acked, as the tailer will
	// read them: the messages' 8-byte headers, padding and the sparse
	// index's arrays included; -1 when not counted.
	LagBytes int64
	// UnackedSince bounds the age of the oldest message not acknowledged
	// (the one at Acked, or the first after it): it was appended no
	// earlier than this, the creation of its cycle file. Messages carry no
	// time, so this is a bound, as close as the roll cycle is short. Zero
	// when Lag is 0 or was not counted.
	UnackedSince time.Time
	Err          error // the slot is damaged: Name, Acked and Lag mean nothing
}

// Stats returns the queue's layout and the fill of its cycle files. It
// maps each cycle file in turn.
func (q *Queue) Stats() (Stats, error) {
	st := Stats{
		Dir:              q.dir,
		FormatVersion:    int(q.meta.Version),
		ChecksumMessages: q.checksums,
		Wakeups:          shm.WakeupMode(),
		Roll:             q.meta.Roll,
		IndexSpacing:     int(q.meta.IndexSpacing),
		MaxCycleSize:     q.meta.MaxCycleSize,
		Created:          time.Unix(0, q.meta.Created),
	}
	if q.closed.Load() {
		return st, ErrClosed
	}
	st.Watchers = int(q.sleepers.Load())
	st.SkippedSlots = q.skipped.Load()
	for i := 0; i < maxLeases; i++ {
		if tok := q.leases[2*i].Load(); tok != 0 && q.witness.Alive(shm.Token(tok)) {
			st.Writers = append(st.Writers, shm.Token(tok).PID())
		}
	}
	for i := 0; i < maxNamedTailers; i++ {
		n := q.tailerWord(i, 0).Load()
		if n == 0 {
			continue
		}
		acked := q.tailerWord(i, 8).Load()
		name, ok := q.tailerName(i, n)
		ts := TailerStats{Name: string(name), Acked: max(acked, 1) - 1, Any: acked != 0}
		if !ok {
			ts = TailerStats{Err: fmt.Errorf("%w: %s: named tailer %d has a name of %d bytes", ErrCorrupt, metaName, i, n)}
		}
		st.Tailers = append(st.Tailers, ts)
	}
	cs, err := q.listCycles()
	if err != nil {
		return st, err
	}
	for _, n := range cs {
		st.Cycles = append(st.Cycles, q.cycleStats(n))
	}
	for i := range st.Tailers {
		if ts := &st.Tailers[i]; ts.Err == nil {
			ts.Lag = lagIn(st.Cycles, ts.Acked, ts.Any)
			ts.LagBytes, ts.UnackedSince = q.unreadIn(st.Cycles, ts.Acked, ts.Any)
			if ts.Lag <= 0 {
				ts.UnackedSince = time.Time{}
			}
		}
	}
	return st, nil
}

// unreadIn returns the slot bytes of the cycles after a named tailer's
// acknowledged index, and the creation time of the cycle holding the
// first message after it (zero when there is none), from the same reading
// of the cycles as Stats.Cycles; -1 when a cycle could not be read. The
// acknowledged message's position is looked up in the sparse index.
func (q *Queue) unreadIn(cycles []CycleStats, acked uint64, some bool) (int64, time.Time) {
	from := uint64(0)
	if some {
		from = acked
	}
	fc, fseq := SplitIndex(from)
	var n int64
	var since time.Time
	for _, c := range cycles {
		if c.Err != nil && !errors.Is(c.Err, os.ErrNotExist) {
			return -1, time.Time{}
		}
		if c.Err != nil || Index(c.Cycle, c.Messages) <= from {
			continue // deleted meanwhile, or wholly acknowledged
		}
		b := c.BytesUsed
		if c.Cycle == fc && fseq > 0 {
			off, err := q.positionOf(fc, fseq)
			if err != nil {
				return -1, time.Time{}
			}
			b = max(0, b-(off-dataStart))
		}
		if since.IsZero() {
			since = c.Created
		}
		n += b
	}
	return n, since
}

// positionOf returns the offset of message seq of cycle n, found from the
// sparse index (at most IndexSpacing headers walked).
func (q *Queue) positionOf(n, seq uint32) (int64, error) {
	c, _, err := q.acquire(n, false, 0)
	if err != nil {
		return 0, err
	}
	defer c.release()
	_, off, err := c.find(seq)
	return off, err
}

// lagIn counts, as Queue.Count does, the messages of the cycles after a
// named tailer's acknowledged index (all of them when it acknowledged
// nothing), from the same reading of the cycles as Stats.Cycles; -1 when a
// cycle could not be read. A cycle deleted since the listing counts
// nothing.
func lagIn(cycles []CycleStats, acked uint64, some bool) int64 {
	from := uint64(0)
	if some {
		from = acked
	}
	var n int64
	for _, c := range cycles {
		if c.Err != nil && !errors.Is(c.Err, os.ErrNotExist) {
			return -1
		}
		n += seqsIn(c.Cycle, c.Messages, from, maxIndex)
	}
	return n
}

func (q *Queue) cycleStats(n uint32) CycleStats {
	cs := CycleStats{Cycle: n, Path: q.cyclePath(n)}
	c, _, err := q.acquire(n, false, 0)
	if err != nil {
		cs.Err = err
		return cs
	}
	defer c.release()
	cs.Created = time.Unix(0, c.created)
	if st, err := c.f.Stat(); err == nil {
		cs.FileSize = st.Size()
	}
	seq, off, err := c.end() // ErrTruncated if the file is now shorter than mapped
	if off >= dataStart {
		cs.Messages, cs.BytesUsed = seq, off-dataStart
	}
	switch {
	case err == errEOF:
		cs.Sealed = true
	case err != nil:
		cs.Err = err
	}
	return cs
}
