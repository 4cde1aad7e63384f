package offmap

import (
	"iter"
	"time"
)

// Range calls fn for every entry until fn returns false. Each segment is
// copied at one instant (optimistically, or with its lock held when
// writers keep changing it) and fn runs on the copy with no lock held, so
// fn may use the map. An entry present for the whole iteration is seen
// exactly once; one added or removed meanwhile may or may not be. The key
// and value slices are valid only during the call.
func (m *Map) Range(fn func(key, value []byte) bool) error {
	var buf []byte
	var spans []int
	for i := range m.hdr.Segments {
		var err error
		s := m.segment(i)
		buf, spans, err = m.snapshot(&s, buf[:0], spans[:0])
		if err != nil {
			return err
		}
		for j := 0; j < len(spans); j += 3 {
			k, v, end := spans[j], spans[j+1], spans[j+2]
			if !fn(buf[k:v:v], buf[v:end:end]) {
				return nil
			}
		}
	}
	return nil
}

// All yields every entry as Range does (each segment copied at one
// instant; the slices valid only until the next step), for use with
// for-range. It stops early, silently, at a segment it cannot read (a
// damaged entry, ErrCorrupt) or when the map is closed: where a short
// iteration matters, use AllErr, which says why it stopped.
func (m *Map) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		m.Range(yield)
	}
}

// AllErr is All that sets *err when the iteration ends: to the error that
// stopped it early (an error wrapping ErrCorrupt for a damaged segment,
// ErrClosed), or nil when it saw every entry or the loop broke out.
// Check *err after the loop, as after bufio.Scanner's:
//
//	var err error
//	for k, v := range m.AllErr(&err) {
//		...
//	}
//	if err != nil { ... }
//
// The error lives in the caller's variable, not in the Map: with a
// variable for each loop, any number of goroutines may iterate at once.
func (m *Map) AllErr(err *error) iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		*err = m.Range(yield)
	}
}

// snapshot appends the keys and values of segment s to buf, and the offsets
// (key start, value start, value end) of each entry to spans.
func (m *Map) snapshot(s *segment, buf []byte, spans []int) ([]byte, []int, error) {
	var since time.Time
	var q quiet
	for try := 0; ; try++ {
		if m.closed.Load() {
			return buf, spans, ErrClosed
		}
		v := s.hdr.version.Load()
		if q = q.ended(s); v&1 != 0 && !q.on {
			var err error
			if q, err = m.readStep(s, v, try, &since); err != nil {
				return buf, spans, err
			}
			continue
		}
		quiescent := q.on
		buf, spans = buf[:0], spans[:0]
		bad, rejected := !m.loadTable(s), false
		var t int64
		if m.expiring {
			t = now()
		}
		// A dead writer's committed UpdateKeys, read through its record:
		// each entry as the transaction makes it (asCommitted), then the
		// entries it inserts that no slot holds yet.
		var tx []txChange
		if quiescent {
			tx = m.committedChanges(s)
		}
		entries := len(s.slots)
		for i := range entries + len(tx) {
			var e entry
			var w uint64
			if i < entries {
				if w = s.slots[i].Load(); w == 0 || w&slotDetached != 0 {
					continue
				}
				var ok bool
				if e, ok = m.entryAt(s, slotChunk(w)); !ok {
					bad = true
					continue
				}
				if len(tx) > 0 {
					key := s.mem[e.keyOff() : e.keyOff()+e.keyLen]
					if e, ok = m.through(s, tx, key, w, e, true); !ok {
						continue
					}
				}
			} else {
				ch := tx[i-entries]
				var ok bool
				if e, ok = m.entryAt(s, ch.b); ch.kind != txInsert || !ok || m.holdsChunk(s, ch.b) {
					continue
				}
			}
			if m.expiring && expiredAt(s.mem, m.expOff(e), t) {
				continue
			}
			k := len(buf)
			buf = append(buf, make([]byte, e.keyLen)...)
			loadKey(buf[k:], s, e)
			vs := len(buf)
			if quiescent && w != 0 && s.hdr.intent.Load() == uint64(slotChunk(w))+1 {
				// A dead writer was rewriting this value: what the entry
				// holds once its redo record is applied, as Get reads it.
				buf = m.scratchValue(buf, s, e)
			} else {
				buf = loadValue(buf, s, e)
				if m.sumRejects(s.mem, w, e.sumOff(), buf[k:vs], buf[vs:]) {
					rejected = true
				}
			}
			spans = append(spans, k, vs, len(buf))
		}
		if readDone(s, v, q) {
			if rejected {
				return buf, spans, m.corrupt(s, "an entry fails its checksum (torn by a power cut, or damaged)")
			}
			if bad {
				if m.mapsPast(len(s.mem)) {
					continue // another process grew the file: map it and look again
				}
				return buf, spans, m.corrupt(s, "an entry lies outside the segment")
			}
			return buf, spans, nil
		}
		var err error
		if q, err = m.readStep(s, v, try, &since); err != nil {
			return buf, spans, err
		}
	}
}

// holdsChunk reports whether a slot of s holds the entry at chunk c.
func (m *Map) holdsChunk(s *segment, c uint32) bool {
	for i := range s.slots {
		if w := s.slots[i].Load(); w != 0 && w&slotDetached == 0 && slotChunk(w) == c {
			return true
		}
	}
	return false
}
