package offmap

import (
	"encoding/binary"
	"fmt"

	"github.com/offmap/offmap/internal/shm"
)

// Conditional updates, by the names sync.Map gives them. Each is one
// locked step on the key's segment: no other writer of any process comes
// between the test and the change. They allocate nothing.

// PutIfAbsent stores value under key if key is absent and reports whether
// it did. A present key keeps its value.
func (m *Map) PutIfAbsent(key, value []byte) (stored bool, err error) {
	if err := m.checkSizes(key, value); err != nil {
		return false, err
	}
	err = m.withKey(key, func(sv segment, h keyHash) error {
		s := &sv
		pos, _, _, found, err := m.lookupLocked(s, key, h)
		if found || err != nil {
			return err
		}
		if _, err := m.insertLocked(s, pos, h, key, value, 0); err != nil {
			return err
		}
		stored = true
		return nil
	})
	return stored, err
}

// Replace sets key's value if key is present and reports whether it did.
// An absent key stays absent.
func (m *Map) Replace(key, value []byte) (replaced bool, err error) {
	if err := m.checkSizes(key, value); err != nil {
		return false, err
	}
	err = m.withKey(key, func(sv segment, h keyHash) error {
		s := &sv
		pos, w, e, found, err := m.lookupLocked(s, key, h)
		if !found {
			return err
		}
		if err := m.updateLocked(s, pos, w, e, value); err != nil {
			return err
		}
		replaced = true
		return nil
	})
	return replaced, err
}

// CompareAndSwap sets key's value to new if key is present with the value
// old, and reports whether it did. A 4- or 8-byte value that handles point
// into (AcquireInt64 and the like) is compared and swapped with one atomic
// instruction, since handles change it without the lock; new must then
// have its size, or ErrValueSize. A longer one (Acquire) is ErrPinned.
func (m *Map) CompareAndSwap(key, old, new []byte) (swapped bool, err error) {
	if err := m.checkSizes(key, new); err != nil {
		return false, err
	}
	err = m.withKey(key, func(sv segment, h keyHash) error {
		s := &sv
		pos, w, e, found, err := m.lookupLocked(s, key, h)
		if !found {
			return err
		}
		if e.valLen != len(old) {
			return nil
		}
		if w&slotPinned != 0 && !handleWord(w, e) {
			return fmt.Errorf("%w: CompareAndSwap of a %d-byte value", ErrPinned, e.valLen)
		}
		if handleWord(w, e) {
			if len(new) != e.valLen {
				return fmt.Errorf("%w: value handles point into this %d-byte value; a %d-byte value cannot replace it",
					ErrValueSize, e.valLen, len(new))
			}
			swapped = casSmall(s.mem[e.valOff():], wordOf(old), new)
			return nil
		}
		if !valueIs(s, e, old) {
			return nil
		}
		if err := m.updateLocked(s, pos, w, e, new); err != nil {
			return err
		}
		swapped = true
		return nil
	})
	return swapped, err
}

// CompareAndDelete deletes key if it is present with the value old, and
// reports whether it did.
func (m *Map) CompareAndDelete(key, old []byte) (deleted bool, err error) {
	if len(key) > int(m.hdr.MaxKey) {
		return false, nil
	}
	err = m.withKey(key, func(sv segment, h keyHash) error {
		s := &sv
		pos, w, e, found, err := m.lookupLocked(s, key, h)
		if !found {
			return err
		}
		if e.valLen != len(old) || !valueIs(s, e, old) {
			return nil
		}
		// A handle's add after this comparison lands on the detached copy,
		// as if it came after the delete.
		m.deleteLocked(s, pos, w, e)
		deleted = true
		return nil
	})
	return deleted, err
}

// handleWord reports whether the entry's value is a word that value
// handles may change at any moment, without the segment lock.
func handleWord(w uint64, e entry) bool {
	return w&slotPinned != 0 && (e.valLen == 4 || e.valLen == 8)
}

// valueIs reports whether e's value, of len(v) bytes, equals v. Values of
// up to 8 bytes are read with one atomic load, as readers do.
func valueIs(s *segment, e entry, v []byte) bool {
	if len(v) > 0 && len(v) <= 8 {
		return shm.U64(s.mem, e.valOff()).Load() == wordOf(v)
	}
	return shm.Equal(s.mem[e.valOff():], v)
}

// wordOf is a value of at most 8 bytes as its zero-padded word.
func wordOf(v []byte) uint64 {
	var b [8]byte
	copy(b[:], v)
	return binary.LittleEndian.Uint64(b[:])
}

// lookupLocked is find for a writer holding s's lock: a key not found
// where the lookup met bytes out of bounds is damage, reported as such.
func (m *Map) lookupLocked(s *segment, key []byte, h keyHash) (pos uint32, w uint64, e entry, found bool, err error) {
	pos, w, e, found, bad := m.findLive(s, key, h)
	if !found && bad {
		err = m.corrupt(s, "a lookup met an entry outside the segment")
	}
	return pos, w, e, found, err
}
