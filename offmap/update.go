package offmap

import (
	"encoding/binary"
	"fmt"

	"github.com/offmap/offmap/internal/shm"
)

// Op tells Update what to do with the value its function returns.
type Op uint8

const (
	// OpNone leaves the map unchanged.
	OpNone Op = iota
	// OpPut stores the returned value, inserting the key if absent.
	OpPut
	// OpDelete deletes the key, if present.
	OpDelete
)

// Update is an atomic read-modify-write of one entry: it runs fn with the
// entry's segment locked, on a copy of key's value (found is false when
// the key is absent), and then does what fn's Op says. No other writer of
// any process changes the entry meanwhile, so increments through Update
// are never lost.
//
// The value passed to fn is valid only during the call. fn must not use
// the map (the segment lock is not reentrant) and should be short: other
// writers to the segment wait for it. If a value handle is changing the
// value concurrently, fn may run more than once (the result is stored with
// a compare-and-swap); a value longer than 8 bytes that handles point into
// (Acquire) is ErrPinned, since no single instruction can swap it.
func (m *Map) Update(key []byte, fn func(value []byte, found bool) ([]byte, Op)) error {
	if len(key) > int(m.hdr.MaxKey) {
		return m.checkSizes(key, nil)
	}
	return m.withKey(key, func(s segment, h keyHash) error { return m.updateKeyLocked(&s, h, key, fn) })
}

func (m *Map) updateKeyLocked(s *segment, h keyHash, key []byte, fn func([]byte, bool) ([]byte, Op)) error {
	pos, w, e, found, bad := m.findLive(s, key, h)
	if !found && bad {
		return m.corrupt(s, "a lookup met an entry outside the segment")
	}
	if found && w&slotPinned != 0 && !handleWord(w, e) {
		return fmt.Errorf("%w: Update of a %d-byte value", ErrPinned, e.valLen)
	}
	for {
		var cur []byte
		var word uint64
		if found {
			if e.valLen > 0 && e.valLen <= 8 {
				word = shm.U64(s.mem, e.valOff()).Load()
				m.bufs[s.idx] = binary.LittleEndian.AppendUint64(m.bufs[s.idx][:0], word)[:e.valLen]
			} else {
				m.bufs[s.idx] = loadValue(m.bufs[s.idx][:0], s, e)
			}
			if m.sumRejects(s.mem, w, e.sumOff(), key, m.bufs[s.idx]) {
				return m.corrupt(s, fmt.Sprintf("Update: the entry of key %q fails its checksum", key))
			}
			cur = m.bufs[s.idx]
		}
		nv, op := fn(cur, found)
		switch op {
		case OpNone:
			return nil
		case OpDelete:
			if found {
				m.deleteLocked(s, pos, w, e)
			}
			return nil
		case OpPut:
		default:
			return fmt.Errorf("offmap: Update: unknown Op %d", op)
		}
		if err := m.checkSizes(key, nv); err != nil {
			return err
		}
		if !found {
			_, err := m.insertLocked(s, pos, h, key, nv, 0)
			return err
		}
		if w&slotPinned == 0 || len(nv) != e.valLen || (e.valLen != 8 && e.valLen != 4) {
			return m.updateLocked(s, pos, w, e, nv)
		}
		// Handles may add to this word at any moment: store with a CAS
		// against what fn saw, or run fn again on the newer value.
		if casSmall(s.mem[e.valOff():], word, nv) {
			return nil
		}
	}
}

// casSmall replaces the 4- or 8-byte value word old with value.
func casSmall(dst []byte, old uint64, value []byte) bool {
	if len(value) == 4 {
		return shm.U32(dst, 0).CompareAndSwap(uint32(old), binary.LittleEndian.Uint32(value))
	}
	return shm.U64(dst, 0).CompareAndSwap(old, binary.LittleEndian.Uint64(value))
}
