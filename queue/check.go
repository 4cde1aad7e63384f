package queue

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/offmap/offmap/internal/shm"
)

// CheckError lists what Check found damaged.
type CheckError struct {
	Dir      string
	Problems []string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("queue: %s: %d problems:\n  %s", e.Dir, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CheckError) Unwrap() error { return ErrCorrupt }

// IndexRange is the indexes [From, To) of one cycle.
type IndexRange struct{ From, To uint64 }

// Check verifies the whole queue: the metadata file's leases and named
// tailers; for every cycle file its header, the chain of slots from the
// first to the first free one (or the end-of-cycle mark), the write hint
// (a slot boundary at or before the end), the sparse index (each entry
// the offset of its message), and the links between cycles (a sealed
// cycle names the next cycle file, which names it as its previous). It
// never changes the files, and may run while other processes append.
//
// It returns the ranges of indexes that hold no message, as nats-server's
// file store reports lost sequences: slots skipped because their writer
// died mid-message or aborted its reservation, and a dead writer's
// unfinished slot, which readers will skip. Those are what crashes and
// aborts leave, not damage. Damage is reported as a
// *CheckError listing each problem (errors.Is(err, ErrCorrupt)).
func (q *Queue) Check() (lost []IndexRange, err error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// The latest cycle before the listing: a roll in between adds a file,
	// never removes the latest.
	latest := q.latest.Load()
	cs, err := q.listCycles()
	if err != nil {
		return nil, err
	}
	switch {
	case latest > maxCycle+1:
		problem("%s: latest cycle %d is out of range", metaName, int64(latest)-1)
	case latest != 0 && (len(cs) == 0 || uint64(cs[len(cs)-1]) < latest-1):
		problem("%s: latest cycle %d has no file", metaName, latest-1)
	}
	// (No latest cycle but cycle files: a process died between creating
	// the first cycle and publishing it; the next appender adopts it.)
	q.checkMeta(problem)

	// Links between consecutive files: retention deletes the oldest
	// cycles first, so no cycle between two files is ever missing.
	var before *cycleCheck
	var beforeNum uint32
	for _, n := range cs {
		cl, r := q.checkCycle(n)
		if cl.deleted {
			before = nil // retention removed it after the listing
			continue
		}
		for _, p := range cl.problems {
			problem("cycle %s: %s", q.cycleName(n), p)
		}
		lost = append(lost, r...)
		if !cl.ok {
			before = nil
			continue
		}
		if before != nil {
			if cl.prev != uint64(beforeNum)+1 {
				problem("cycle %s: names cycle %d as its previous, but the file before it is cycle %d", q.cycleName(n), int64(cl.prev)-1, beforeNum)
			}
			if before.next != 0 && before.next != uint64(n)+1 {
				problem("cycle %s: names cycle %d as its next, but the file after it is cycle %d", q.cycleName(beforeNum), int64(before.next)-1, n)
			}
			if before.sealed && before.next == 0 {
				problem("cycle %s: sealed but names no next cycle", q.cycleName(beforeNum))
			}
		}
		before, beforeNum = &cl, n
	}
	if before != nil && before.sealed {
		// A roll after the listing creates the next file before it seals
		// this one: look again before calling it missing.
		if next, ok, err := q.firstCycleFrom(beforeNum + 1); err != nil {
			return lost, err
		} else if !ok || uint64(next) != before.next-1 {
			// Retention deletes the oldest cycles first: if it deleted the
			// next file during this check, it deleted this one before.
			// Only while this one is still there is its successor missing.
			if still, ok, err := q.firstCycleFrom(beforeNum); err != nil {
				return lost, err
			} else if ok && still == beforeNum {
				problem("cycle %s: sealed, but no file follows it (it names cycle %d)", q.cycleName(beforeNum), int64(before.next)-1)
			}
		}
	}
	if len(problems) > 0 {
		return lost, &CheckError{Dir: q.dir, Problems: problems}
	}
	return lost, nil
}

// checkMeta checks the writer leases and the named tailers.
func (q *Queue) checkMeta(problem func(string, ...any)) {
	for i := 0; i < maxLeases; i++ {
		tok, gen := q.leases[2*i].Load(), q.leases[2*i+1].Load()
		if tok != 0 && (gen == 0 || gen > genMask) {
			problem("%s: writer lease %d has generation %d", metaName, i, gen)
		}
	}
	for i := 0; i < maxNamedTailers; i++ {
		n := q.tailerWord(i, 0).Load()
		if n == 0 {
			continue
		}
		name, ok := q.tailerName(i, n)
		if !ok {
			problem("%s: named tailer %d has a name of %d bytes", metaName, i, n)
			continue
		}
		acked := q.tailerWord(i, 8).Load()
		if acked == 0 {
			continue
		}
		latest := q.latest.Load() // after the ack: a later roll only raises it
		if c, _ := SplitIndex(acked - 1); latest == 0 || uint64(c) > latest-1 {
			problem("%s: named tailer %q acknowledged %d:%d, past the latest cycle", metaName, name, c, uint32(acked-1))
		}
	}
}

// cycleCheck is what checkCycle learnt of one cycle file.
type cycleCheck struct {
	deleted  bool // the file was gone when opened (retention)
	ok       bool // the file could be mapped and walked
	prev     uint64
	next     uint64
	sealed   bool
	problems []string
}

// checkCycle walks cycle n's slots and checks its hint and index.
func (q *Queue) checkCycle(n uint32) (cl cycleCheck, lost []IndexRange) {
	problem := func(format string, args ...any) { cl.problems = append(cl.problems, fmt.Sprintf(format, args...)) }
	c, _, err := q.acquire(n, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		cl.deleted = true
		return cl, nil
	}
	if err != nil {
		problem("%v", err)
		return cl, nil
	}
	defer c.release()
	if err := c.checkSize(); err != nil {
		problem("%v", err) // the walk would fault past the file's end
		return cl, nil
	}
	// Read the shared words before the walk: the walk's end is then at or
	// after what they describe, even while appenders go on.
	hint := c.hint.Load()
	cl.prev = c.prev
	l1 := make([]int64, l1Entries)
	for a := range l1 {
		l1[a] = int64(c.l1[a].Load())
	}

	hs, ho := unpackHint(hint)
	hintSeen := hint == 0         // the walk landed on the hint's offset with its sequence
	indexed := map[uint32]int64{} // message seq (multiple of the spacing) -> offset
	arrays := map[int64]bool{}    // payload offsets of index arrays
	addLost := func(s uint32) {
		idx := Index(n, s)
		if k := len(lost); k > 0 && lost[k-1].To == idx {
			lost[k-1].To++
			return
		}
		lost = append(lost, IndexRange{idx, idx + 1})
	}
	w := c.walkFrom(0, dataStart)
	for {
		if w.off == ho && w.seq == hs {
			hintSeen = true
		}
		h, err := w.header()
		if err != nil {
			problem("%v", err)
			return cl, lost
		}
		if h == 0 {
			break
		}
		if h&flagEOF != 0 {
			cl.sealed = true
			break
		}
		switch {
		case h&flagMeta != 0:
			if h&lenMask == indexArraySlot {
				arrays[w.off+8] = true
			}
		case h&flagSkipped != 0:
			addLost(w.seq)
		case h&flagBusy != 0 && q.writerDead(h):
			addLost(w.seq)
		case h&flagBusy == 0 && q.checksums:
			if _, err := w.c.slotEnd(&w.mem, w.off, h); err == nil { // else step reports it
				if _, err := checkedPayload(w.mem, w.off+8, int64(h&lenMask), Index(n, w.seq)); err != nil {
					problem("message %d:%d %v", n, w.seq, err)
				}
			}
		}
		if h&flagMeta == 0 && w.seq&(1<<q.spacing-1) == 0 {
			indexed[w.seq] = w.off
		}
		if err := w.step(h); err != nil {
			problem("%v", err)
			return cl, lost
		}
	}
	cl.ok = true
	// After the walk: a roller names the next cycle before it seals, so a
	// seal the walk saw comes with its next word.
	cl.next = c.next.Load()
	if !hintSeen {
		problem("write hint %d:%d is not a slot boundary of the walk (which ends at %d:%d)", hs, ho, w.seq, w.off)
	}
	mem, seq := w.mem, w.seq
	for a, arr := range l1 {
		if arr == 0 {
			continue
		}
		if !arrays[arr] {
			problem("level-1 index entry %d points at %d, not at an index array", a, arr)
			continue
		}
		for e := int64(0); e < indexEntries; e++ {
			at := int64(shm.U64(mem, int(arr+e*8)).Load())
			s := uint32((int64(a)*indexEntries + e) << q.spacing)
			if at == 0 || s >= seq {
				continue // not recorded, or a message the walk has not reached
			}
			if want, ok := indexed[s]; !ok || want != at {
				problem("index entry for message %d is %d, the message is at %d", s, at, want)
			}
		}
	}
	return cl, lost
}
