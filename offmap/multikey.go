package offmap

import (
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
// (copies, valid during the call; found[i] false when keys[i] is absent),
// and applies what fn returns: for each key an Op and, for OpPut, its new
// value. While it runs, the segments' versions stay odd, so readers
// (Get, ViewKeys) see either none of the changes or all of them: a
// transfer between two counters never shows a sum that is off.
//
// The changes are one transaction (txn.go), also across a crash: a
// process killed inside UpdateKeys leaves all of them made or none, and
// whoever next locks one of the segments finishes or drops them. (A
// read-only process that reads the segments of a killed UpdateKeys before
// any writer has repaired them sees each as the dead process left it.)
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
	segs, hashes := m.segmentsOf(keys)
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

	vals := make([][]byte, len(keys))
	found := make([]bool, len(keys))
	chunk := make([]uint32, len(keys))
	for i, k := range keys {
		s := segOf(segs, hashes[i].seg)
		_, w, e, ok, bad := m.findLive(s, k, hashes[i])
		switch {
		case ok && w&slotPinned != 0:
			return fmt.Errorf("%w: UpdateKeys: %q", ErrPinned, k)
		case ok:
			vals[i], found[i], chunk[i] = loadValue(nil, s, e), true, slotChunk(w)
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

	// Odd versions over every change: readers wait or retry until all are
	// made. Not in a defer: if a change panics, the versions stay odd and
	// the next writer repairs the segments, as after a crash.
	for i := range segs {
		beginChange(&segs[i])
		segs[i].inTx = true
	}
	err := m.transact(keys, hashes, segs, news, ops, chunk, found)
	for i := range segs {
		segs[i].inTx = false
		endChange(&segs[i])
	}
	return err
}

// ViewKeys reads several keys at one instant: fn gets each key's value
// (copies, valid during the call; found[i] false when keys[i] is absent)
// as they all were together at some moment during the call, even while
// UpdateKeys changes them. Like Get it takes no lock, unless writers keep
// the segments busy.
func (m *Map) ViewKeys(keys [][]byte, fn func(values [][]byte, found []bool)) error {
	if m.closed.Load() {
		return ErrClosed
	}
	segs, hashes := m.segmentsOf(keys)
	vals := make([][]byte, len(keys))
	found := make([]bool, len(keys))
	versions := make([]uint64, len(segs))
	// quiescent[i]: a read-only process found segment i's writer dead; it
	// reads that segment as the writer left it, with no version check.
	quiescent := make([]bool, len(segs))
	since := make([]time.Time, len(segs))
	for try := 0; ; try++ {
		busy, badLookup := -1, false
		for i := range segs {
			if versions[i] = segs[i].hdr.version.Load(); versions[i]&1 != 0 && !quiescent[i] {
				busy = i
				break
			}
		}
		if busy < 0 {
			for i := range segs {
				m.loadTable(&segs[i])
			}
			busy = m.viewOnce(keys, hashes, segs, quiescent, vals, found)
			badLookup = busy >= 0
			for i := range segs {
				if busy < 0 && !quiescent[i] && segs[i].hdr.version.Load() != versions[i] {
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
		if badLookup && m.mapsPast(len(segs[busy].mem)) {
			continue // another process grew the file: map it and look again
		}
		q, err := m.readStep(&segs[busy], try, &since[busy])
		if err != nil {
			return err
		}
		quiescent[busy] = q
		if m.closed.Load() {
			return ErrClosed
		}
	}
}

// viewOnce reads every key's value into vals; it returns the index of a
// segment where a lookup met bytes out of bounds (a torn read: look
// again), or -1.
func (m *Map) viewOnce(keys [][]byte, hashes []keyHash, segs []segment, quiescent []bool, vals [][]byte, found []bool) int {
	for i, k := range keys {
		vals[i], found[i] = vals[i][:0], false
		if len(k) > int(m.hdr.MaxKey) {
			continue
		}
		s := segOf(segs, hashes[i].seg)
		_, w, e, ok, bad := m.find(s, k, hashes[i])
		if bad && !ok {
			return slices.IndexFunc(segs, func(x segment) bool { return x.idx == s.idx })
		}
		if !ok || m.expired(s, e) {
			continue
		}
		if quiescent[slices.IndexFunc(segs, func(x segment) bool { return x.idx == s.idx })] &&
			s.hdr.intent.Load() == uint64(slotChunk(w))+1 {
			// A dead writer was rewriting this value: what the entry
			// holds once its redo record is applied.
			vals[i] = m.scratchValue(vals[i], s, e)
		} else {
			vals[i] = loadValue(vals[i], s, e)
		}
		found[i] = true
	}
	return -1
}

// segmentsOf returns the distinct segments of keys, in segment order,
// and each key's hash.
func (m *Map) segmentsOf(keys [][]byte) ([]segment, []keyHash) {
	hashes := make([]keyHash, len(keys))
	var idx []uint32
	for i, k := range keys {
		hashes[i] = m.hash(k)
		idx = append(idx, hashes[i].seg)
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	segs := make([]segment, len(idx))
	for i, n := range idx {
		segs[i] = m.segment(n)
	}
	return segs, hashes
}

func segOf(segs []segment, n uint32) *segment {
	for i := range segs {
		if segs[i].idx == int(n) {
			return &segs[i]
		}
	}
	panic("offmap: segment not locked")
}
