package offmap

import (
	"fmt"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Expiry (Options.TTL, Options.Expiring): each entry keeps the time it
// expires at, in Unix nanoseconds of the wall clock, which every process
// on the machine shares; 0 means never. Readers treat an entry whose time
// has passed as absent; writers that meet one under the lock delete it
// first (lazily), and Sweep deletes them all.

// now is the clock expiry is judged by; tests in this package may set it.
var now = func() int64 { return time.Now().UnixNano() }

// stampExpiry sets the clock reading and the default expiry time of a
// write to s: one read of the clock per operation, where entries expire.
func (m *Map) stampExpiry(s *segment) {
	if !m.expiring {
		return
	}
	s.now = now()
	s.expires = 0
	if m.ttl != 0 {
		s.expires = s.now + m.ttl
	}
}

// expiredAt reports whether the entry whose expiry word is at off in mem
// has expired by t.
func expiredAt(mem []byte, off int, t int64) bool {
	x := int64(shm.U64(mem, off).Load())
	return x != 0 && x <= t
}

// expiredNow is expiredAt for a reader, which reads the clock only for an
// entry that has an expiry time. (A clock read costs about a cache miss
// in a run of lookups: it stops the CPU from overlapping them.)
func expiredNow(mem []byte, off int) bool {
	x := int64(shm.U64(mem, off).Load())
	return x != 0 && x <= now()
}

// expired reports whether e has expired (never where entries have no
// expiry time), by the operation's clock reading or, for readers, now.
func (m *Map) expired(s *segment, e entry) bool {
	if !m.expiring {
		return false
	}
	if s.now != 0 {
		return expiredAt(s.mem, m.expOff(e), s.now)
	}
	return expiredNow(s.mem, m.expOff(e))
}

// findLive is find for writers: an entry that has expired is deleted
// first, and then is absent. A pinned one is not: deleting it would
// detach its handles.
func (m *Map) findLive(s *segment, key []byte, h keyHash) (pos uint32, w uint64, e entry, found, bad bool) {
	pos, w, e, found, bad = m.find(s, key, h)
	if found && w&slotPinned == 0 && m.expired(s, e) {
		m.deleteLocked(s, pos, w, e)
		m.counters().expiredRemoved.Add(1)
		pos, w, e, found, bad = m.find(s, key, h)
	}
	return pos, w, e, found, bad
}

// PutTTL is Put with a time to live of its own: the entry expires ttl
// after now. The map must let entries expire (Options.TTL or Expiring).
// An entry that value handles point into never expires (ErrPinned).
func (m *Map) PutTTL(key, value []byte, ttl time.Duration) error {
	return m.PutExpiring(key, value, time.Now().Add(ttl))
}

// PutExpiring is Put of an entry that expires at the given time (a time
// in the past stores an entry that no one reads), or never for the zero
// time. The map must let entries expire (Options.TTL or Expiring). An
// entry that value handles point into never expires (ErrPinned).
func (m *Map) PutExpiring(key, value []byte, at time.Time) error {
	if !m.expiring {
		return fmt.Errorf("%w: %s was created without Options.TTL or Options.Expiring: its entries cannot expire", ErrOptionsMismatch, m.path)
	}
	if err := m.checkSizes(key, value); err != nil {
		return err
	}
	var x int64
	if !at.IsZero() {
		x = max(at.UnixNano(), 1)
	}
	return m.withKey(key, func(sv segment, h keyHash) error {
		s := &sv
		s.expires = x // instead of the map's TTL
		s.ownExpiry = true
		return m.putLocked(s, key, value, h)
	})
}

// Sweep deletes every entry that has expired and returns how many. It
// takes each segment's lock in turn, as writers do, so any process may
// run it while others use the map.
func (m *Map) Sweep() (int, error) {
	if err := m.enterWrite(); err != nil {
		return 0, err
	}
	defer m.exitWrite()
	if !m.expiring {
		return 0, nil
	}
	swept := 0
	for i := range m.hdr.Segments {
		s := m.segment(i)
		if err := m.lock(&s); err != nil {
			return swept, err
		}
		n, next := m.sweepSegment(&s, now())
		if m.evict {
			m.evictArea(&s).ctl.sweepAt.Store(uint64(next))
		}
		swept += n
		s.hdr.lock.Unlock()
	}
	return swept, nil
}

// sweepSegment deletes the entries of s that have expired by t, with the
// lock held. It returns how many, and the earliest expiry time among the
// others (0 if none expires).
func (m *Map) sweepSegment(s *segment, t int64) (swept int, next int64) {
	for j := uint32(0); j < uint32(len(s.slots)); {
		w := s.slots[j].Load()
		if w == 0 || w&slotDetached != 0 {
			j++
			continue
		}
		e, ok := m.entryAt(s, slotChunk(w))
		// A pinned entry never expires; one may still carry a time
		// from a build before that rule.
		if !ok || w&slotPinned != 0 {
			j++
			continue
		}
		if x := int64(shm.U64(s.mem, m.expOff(e)).Load()); x == 0 || x > t {
			if x != 0 && (next == 0 || x < next) {
				next = x
			}
			j++
			continue
		}
		m.deleteLocked(s, j, w, e) // may move a later entry into j: look at j again
		m.counters().expiredRemoved.Add(1)
		swept++
	}
	return swept, next
}

// expiredCount counts the entries of s that have expired by t (Stats).
func (m *Map) expiredCount(s *segment, t int64) int {
	n := 0
	for i := range s.slots {
		w := s.slots[i].Load()
		if w == 0 || w&(slotDetached|slotPinned) != 0 { // pinned: never swept
			continue
		}
		if e, ok := m.entryAt(s, slotChunk(w)); ok && expiredAt(s.mem, m.expOff(e), t) {
			n++
		}
	}
	return n
}
