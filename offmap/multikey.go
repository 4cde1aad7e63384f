package offmap

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Several keys at once, as Chronicle Map's multi-key contexts: UpdateKeys
// changes them in one step and ViewKeys reads them at one instant. Each
// takes the segments' locks, or checks their versions, in segment order,
// so that no two callers in any processes wait for each other in a cycle.

// UpdateKeys is Update over several keys at once. It locks the segments
// of all the keys, in segment order, runs fn once with each key's value
// (copies, valid during the call: values, found and the values' bytes are
// reused once fn returns, so copy what you keep; found[i] false and
// values[i] nil when keys[i] is absent), and applies what fn returns: for
// each key an Op and, for OpPut, its new value. While it runs, the
// segments' versions stay odd, so readers (Get, ViewKeys) see either none
// of the changes or all of them: a transfer between two counters never
// shows a sum that is off.
//
// The changes are one transaction, also across a crash: a
// process killed inside UpdateKeys leaves all of them made or none, and
// whoever next locks one of the segments finishes or drops them. A
// read-only process, which cannot repair, reads such segments through the
// transaction's records: all or nothing too, by every read.
// New values are written beside the old ones until all are in place, so
// UpdateKeys needs room for both: when that room cannot be found
// (ErrFull), nothing is changed, even where the same changes made one by
// one would have fit.
//
// A key may appear once; fn must not use the map (the segments are
// locked). Values that value handles point into (AcquireInt64, Acquire)
// change under the handles without any lock, so UpdateKeys refuses them
// with ErrPinned before fn runs; use the handles.
func (m *Map) UpdateKeys(keys [][]byte, fn func(values [][]byte, found []bool) ([][]byte, []Op)) error {
	for i, k := range keys {
		if len(k) > int(m.hdr.MaxKey) {
			return m.checkSizes(k, nil)
		}
		for _, prev := range keys[:i] {
			if string(prev) == string(k) {
				return fmt.Errorf("offmap: UpdateKeys: key %q appears twice", k)
			}
		}
	}
	if err := m.enterWrite(); err != nil {
		return err
	}
	defer m.exitWrite()
	sc := m.scratchFor(keys)
	defer m.keysScratch.Put(sc)
	segs, hashes := sc.segs, sc.hashes
	for i := range segs {
		if err := m.lock(&segs[i]); err != nil {
			for j := range i {
				segs[j].hdr.lock.Unlock()
			}
			return err
		}
	}
	defer func() {
		for i := range segs {
			segs[i].hdr.lock.Unlock()
		}
	}()
	for i := range segs {
		m.stampExpiry(&segs[i])
	}

	vals, found, chunk := sc.vals, sc.found, sc.chunk
	for i, k := range keys {
		s := &segs[sc.keySeg[i]]
		_, w, e, ok, bad := m.findLive(s, k, hashes[i])
		switch {
		case ok && w&slotPinned != 0:
			return fmt.Errorf("%w: UpdateKeys: %q", ErrPinned, k)
		case ok:
			sc.bufs[i] = loadValue(sc.bufs[i][:0], s, e)
			if m.sumRejects(s.mem, w, e.sumOff(), k, sc.bufs[i]) {
				return m.corrupt(s, fmt.Sprintf("UpdateKeys: the entry of key %q fails its checksum", k))
			}
			vals[i], found[i], chunk[i] = capped(sc.bufs[i]), true, slotChunk(w)
		case bad:
			return m.corrupt(s, "a lookup met an entry outside the segment")
		}
	}
	news, ops := fn(vals, found)
	if len(ops) != len(keys) || len(news) != len(keys) {
		return fmt.Errorf("offmap: UpdateKeys: fn returned %d values and %d ops for %d keys", len(news), len(ops), len(keys))
	}
	for i, op := range ops {
		switch op {
		case OpNone, OpDelete:
		case OpPut:
			if err := m.checkSizes(keys[i], news[i]); err != nil {
				return err
			}
		default:
			return fmt.Errorf("offmap: UpdateKeys: unknown Op %d", op)
		}
	}

	// In a map that evicts, room for the inserts first; and when the
	// values find no room (the transaction then changed nothing), more.
	if m.evict {
		if err := m.roomForKeys(segs, keys, sc, ops); err != nil {
			return err
		}
	}
	for {
		// Odd versions over every change: readers wait or retry until all
		// are made. Not in a defer: if a change panics, the versions stay
		// odd and the next writer repairs the segments, as after a crash.
		for i := range segs {
			beginChange(&segs[i])
			segs[i].inTx = true
		}
		err := m.transact(keys, sc, news, ops)
		for i := range segs {
			segs[i].inTx = false
			endChange(&segs[i])
		}
		if !m.evict || !errors.Is(err, ErrFull) || sc.full == nil || !m.roomIn(sc.full, keys, sc) {
			return err
		}
		for i := range sc.parts {
			sc.parts[i] = txPart{changes: sc.parts[i].changes[:0]}
		}
	}
}

// ViewKeys reads several keys at one instant: fn gets each key's value
// (copies, valid during the call and reused after it, as UpdateKeys's;
// found[i] false and values[i] nil when keys[i] is absent)
// as they all were together at some moment during the call, even while
// UpdateKeys changes them. Like Get it takes no lock, unless writers keep
// the segments busy.
func (m *Map) ViewKeys(keys [][]byte, fn func(values [][]byte, found []bool)) error {
	if m.closed.Load() {
		return ErrClosed
	}
	sc := m.scratchFor(keys)
	defer m.keysScratch.Put(sc)
	segs, vals, found := sc.segs, sc.vals, sc.found
	versions := sc.versions
	// quiescent[i]: a read-only process found segment i's writer dead; it
	// reads that segment as the writer left it (read.go, quiet).
	quiescent := sc.quiescent
	since := sc.since
	for try := 0; ; try++ {
		busy, badLookup := -1, false
		for i := range segs {
			quiescent[i] = quiescent[i].ended(&segs[i])
			if versions[i] = segs[i].hdr.version.Load(); versions[i]&1 != 0 && !quiescent[i].on {
				busy = i
				break
			}
		}
		if busy < 0 {
			for i := range segs {
				m.loadTable(&segs[i])
			}
			busy = m.viewOnce(keys, sc)
			badLookup = busy >= 0
			for i := range segs {
				if busy < 0 && !readDone(&segs[i], versions[i], quiescent[i]) {
					busy = i
				}
			}
			if busy < 0 {
				if m.closed.Load() {
					return ErrClosed
				}
				fn(vals, found)
				return nil
			}
		}
		if badLookup {
			if m.mapsPast(len(segs[busy].mem)) {
				continue // another process grew the file: map it and look again
			}
			// Out of bounds under a stable version (or in a segment read
			// as its dead writer left it) is damage, not a torn read.
			if readDone(&segs[busy], versions[busy], quiescent[busy]) {
				return m.corrupt(&segs[busy], "a lookup met an entry outside the segment, or one that fails its checksum")
			}
		}
		q, err := m.readStep(&segs[busy], versions[busy], try, &since[busy])
		if err != nil {
			return err
		}
		quiescent[busy] = q
		if m.closed.Load() {
			return ErrClosed
		}
	}
}

// viewOnce reads every key's value into sc.vals; it returns the index of
// a segment where a lookup met bytes out of bounds (a torn read: look
// again), or -1.
func (m *Map) viewOnce(keys [][]byte, sc *keysScratch) int {
	for i, k := range keys {
		sc.bufs[i], sc.vals[i], sc.found[i] = sc.bufs[i][:0], nil, false
		if len(k) > int(m.hdr.MaxKey) {
			continue
		}
		j := sc.keySeg[i]
		s := &sc.segs[j]
		_, w, e, ok, bad := m.find(s, k, sc.hashes[i])
		if sc.quiescent[j].on {
			e, ok = m.asCommitted(s, k, w, e, ok)
		}
		if bad && !ok {
			return j
		}
		if !ok || m.expired(s, e) {
			continue
		}
		if sc.quiescent[j].on && s.hdr.intent.Load() == uint64(slotChunk(w))+1 {
			// A dead writer was rewriting this value: what the entry
			// holds once its redo record is applied.
			sc.bufs[i] = m.scratchValue(sc.bufs[i], s, e)
		} else {
			sc.bufs[i] = loadValue(sc.bufs[i], s, e)
			if m.sumRejects(s.mem, w, e.sumOff(), k, sc.bufs[i]) {
				return j // torn under a changing version, damage under a stable one
			}
		}
		sc.vals[i], sc.found[i] = capped(sc.bufs[i]), true
	}
	return -1
}

// keysScratch is the memory of one UpdateKeys or ViewKeys call, pooled
// (Map.keysScratch) so that a call allocates nothing once warm.
type keysScratch struct {
	hashes    []keyHash   // per key
	keySeg    []int       // per key: its segment's index in segs
	segs      []segment   // the keys' distinct segments, in segment order
	vals      [][]byte    // per key: its value, for fn (nil: absent)
	bufs      [][]byte    // per key: the memory of its value
	found     []bool      // per key
	chunk     []uint32    // per key: its entry's chunk (UpdateKeys)
	segIdx    []uint32    // per segment: its number, while sorting
	parts     []txPart    // per segment: its share of the transaction
	partList  []*txPart   // the segments that take part, in segment order
	since     []time.Time // per segment (ViewKeys)
	versions  []uint64    // per segment (ViewKeys)
	quiescent []quiet     // per segment (ViewKeys)
	full      *segment    // the segment where UpdateKeys found no room
}

// scratchFor returns a keysScratch set up for keys: their hashes and their
// distinct segments, in segment order, with every per-key and
// per-segment slice cleared.
func (m *Map) scratchFor(keys [][]byte) *keysScratch {
	sc, _ := m.keysScratch.Get().(*keysScratch)
	if sc == nil {
		sc = new(keysScratch)
	}
	n := len(keys)
	sc.hashes = resize(sc.hashes, n)
	sc.keySeg = resize(sc.keySeg, n)
	sc.vals = resize(sc.vals, n)
	sc.bufs = grow(sc.bufs, n)
	sc.found = resize(sc.found, n)
	sc.chunk = resize(sc.chunk, n)
	sc.segIdx = sc.segIdx[:0]
	for i, k := range keys {
		sc.hashes[i] = m.hash(k)
		sc.segIdx = append(sc.segIdx, sc.hashes[i].seg)
	}
	slices.Sort(sc.segIdx)
	sc.segIdx = slices.Compact(sc.segIdx)
	ns := len(sc.segIdx)
	sc.segs = resize(sc.segs, ns)
	for i, seg := range sc.segIdx {
		sc.segs[i] = m.segment(seg)
	}
	for i := range keys {
		sc.keySeg[i], _ = slices.BinarySearch(sc.segIdx, sc.hashes[i].seg)
	}
	sc.parts = grow(sc.parts, ns)
	for i := range sc.parts {
		sc.parts[i] = txPart{changes: sc.parts[i].changes[:0]}
	}
	sc.since = resize(sc.since, ns)
	sc.versions = resize(sc.versions, ns)
	sc.quiescent = resize(sc.quiescent, ns)
	return sc
}

// capped returns b with no room past its length: fn cannot reach bytes
// an earlier call left in the buffer.
func capped(b []byte) []byte { return b[:len(b):len(b)] }

// resize returns s with length n and every element zero, in s's memory
// where it has room.
func resize[T any](s []T, n int) []T {
	s = grow(s, n)
	clear(s)
	return s
}

// grow returns s with length n, in s's memory where it has room; the
// elements it had keep their values (bufs keep their memory so).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		s = append(s[:cap(s)], make([]T, n-cap(s))...)
	}
	return s[:n]
}
