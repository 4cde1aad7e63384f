package offmap

import (
	"fmt"

	"github.com/offmap/offmap/values"
)

// Value handles point straight at an entry's value in the mapped file.
// Acquiring one pins the entry: its value keeps its size and place for as
// long as the entry exists (a Put of another size fails with
// ErrValueSize). After the key is deleted, a handle still works on the
// detached entry, which no lookup reaches and no other key reuses until
// every process has closed the map: its writes are simply no longer
// visible through the map. It never writes into another key's value.
//
// In a map whose entries expire, a pinned entry does not: Acquire clears
// its expiry time, a Put keeps it cleared, and PutTTL or PutExpiring of a
// time is ErrPinned. Otherwise the map's TTL would detach every handle
// after a while, silently. (An entry pinned by an older build may carry a
// time: once it passes, reads see the entry absent until a write or an
// Acquire clears the time, but neither writers nor Sweep delete it.)

// zeros is the value of a new entry that a handle is acquired on.
var zeros [4096]byte

func zeroValue(size int) []byte {
	if size <= len(zeros) {
		return zeros[:size]
	}
	return make([]byte, size)
}

// acquire returns the value bytes of key, creating the entry with a zero
// value of size bytes when absent, and pins it.
func (m *Map) acquire(key []byte, size int, kind string) ([]byte, error) {
	if err := m.checkSizes(key, zeroValue(size)); err != nil {
		return nil, err
	}
	var value []byte
	err := m.withKey(key, func(sv segment, h keyHash) error {
		s := &sv
		s.expires = 0 // a pinned entry never expires (updateLocked)
		pos, w, e, found, bad := m.findLive(s, key, h)
		switch {
		case found && e.valLen != size:
			return fmt.Errorf("%w: the key holds a %d-byte value; an %s handle needs %d bytes", ErrValueSize, e.valLen, kind, size)
		case found:
			m.writeExpiry(s, e) // before the pin: no pinned entry ever has a time
			if w&slotPinned == 0 {
				s.slots[pos].Store(w | slotPinned)
			}
		case bad:
			return m.corrupt(s, "a lookup met an entry outside the segment")
		default:
			var err error
			if e, err = m.insertLocked(s, pos, h, key, zeroValue(size), slotPinned); err != nil {
				return err
			}
		}
		m.handlesIssued.Store(true)
		value = s.mem[e.valOff() : e.valOff()+size]
		return nil
	})
	return value, err
}

// AcquireInt64 returns a handle on key's 8-byte value, creating the entry
// with value 0 when absent, or ErrValueSize when key's value has another
// size. Load, Store, Add and CompareAndSwap on the handle act atomically
// on the mapped bytes: every process sees them at once and they persist
// without a Put.
//
// The handle pins the entry for good (for the life of the file, not just
// of the handle): its value keeps its place and its 8 bytes, so handles in
// every process stay valid. A later Put of a value of another size to the
// key gets ErrValueSize; a Put of 8 bytes stores them in place. After
// Delete the handle works on a detached copy that no lookup reaches.
func (m *Map) AcquireInt64(key []byte) (values.Int64, error) {
	b, err := m.acquire(key, 8, "Int64")
	if err != nil {
		return values.Int64{}, err
	}
	return values.NewInt64(b, m.guard)
}

// AcquireUint64 is AcquireInt64 for a uint64.
func (m *Map) AcquireUint64(key []byte) (values.Uint64, error) {
	b, err := m.acquire(key, 8, "Uint64")
	if err != nil {
		return values.Uint64{}, err
	}
	return values.NewUint64(b, m.guard)
}

// AcquireInt32 is AcquireInt64 for a 4-byte int32 value.
func (m *Map) AcquireInt32(key []byte) (values.Int32, error) {
	b, err := m.acquire(key, 4, "Int32")
	if err != nil {
		return values.Int32{}, err
	}
	return values.NewInt32(b, m.guard)
}

// AcquireFloat64 is AcquireInt64 for a float64 (its IEEE 754 bits).
func (m *Map) AcquireFloat64(key []byte) (values.Float64, error) {
	b, err := m.acquire(key, 8, "Float64")
	if err != nil {
		return values.Float64{}, err
	}
	return values.NewFloat64(b, m.guard)
}
