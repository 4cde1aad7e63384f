package queue

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/offmap/offmap/internal/shm"
)

// NamedTailer returns a tailer whose acknowledged position persists in the
// queue: it starts after the last message acknowledged (see Ack) by any
// tailer of that name, in any process, or at the start. Names are 1 to 48
// bytes; a queue holds up to 128 of them. A queue open read-only cannot add
// a name: an unknown one gets ErrNotFound.
func (q *Queue) NamedTailer(name string) (*Tailer, error) {
	if len(name) == 0 || len(name) > maxTailerName {
		return nil, fmt.Errorf("%w: tailer name of %d bytes (1 to %d)", ErrInvalidOptions, len(name), maxTailerName)
	}
	slot, err := q.tailerSlot(name, !q.readOnly)
	if err != nil {
		return nil, err
	}
	if slot < 0 {
		return nil, fmt.Errorf("%w: no tailer named %q, and a queue open read-only cannot add one", ErrNotFound, name)
	}
	t, err := q.Tailer()
	if err != nil {
		return nil, err
	}
	t.slot = slot
	if acked := q.tailerWord(slot, 8).Load(); acked != 0 {
		err := t.Seek(acked - 1)
		if errors.Is(err, ErrNotFound) {
			// Its cycle was deleted by a forced retention: go on from
			// the next cycle that exists.
			t.SeekStart()
			t.from = uint32((acked - 1) >> 32)
			return t, nil
		}
		if err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

func (q *Queue) tailerWord(slot, off int) *atomic.Uint64 {
	return shm.U64(q.tailers, slot*tailerSlotSize+off)
}

// tailerSlot finds the slot of a named tailer, adding it if asked to. It
// returns -1 when the name is absent and add is false.
func (q *Queue) tailerSlot(name string, add bool) (int, error) {
	if add {
		if _, err := q.lock.Lock(q.witness, 0); err != nil {
			return -1, err
		}
		defer q.lock.Unlock()
	}
	free := -1
	for i := 0; i < maxNamedTailers; i++ {
		n := q.tailerWord(i, 0).Load()
		if n == 0 {
			if free < 0 {
				free = i
			}
			continue
		}
		if q.slotNamed(i, name) {
			return i, nil
		}
	}
	if !add {
		return -1, nil
	}
	if free < 0 {
		return -1, ErrTooManyTailers
	}
	base := free*tailerSlotSize + 16
	copy(q.tailers[base:base+maxTailerName], name)
	clear(q.tailers[base+len(name) : base+maxTailerName])
	q.tailerWord(free, 8).Store(0)
	q.tailerWord(free, 0).Store(uint64(len(name)))
	return free, nil
}

// tailerName returns the name in a slot whose name length word holds n,
// or false when n is not a valid length (damage: the word is read from the
// file, so it is checked before it bounds a slice).
func (q *Queue) tailerName(slot int, n uint64) ([]byte, bool) {
	if n == 0 || n > maxTailerName {
		return nil, false
	}
	base := slot*tailerSlotSize + 16
	return q.tailers[base : base+int(n)], true
}

// slotNamed reports whether tailer slot i holds name.
func (q *Queue) slotNamed(i int, name string) bool {
	b, ok := q.tailerName(i, q.tailerWord(i, 0).Load())
	return ok && string(b) == name
}

// DeleteTailer forgets a named tailer, so that retention no longer spares
// the cycles it has not acknowledged.
func (q *Queue) DeleteTailer(name string) error {
	if q.readOnly {
		return ErrReadOnly
	}
	if _, err := q.lock.Lock(q.witness, 0); err != nil {
		return err
	}
	defer q.lock.Unlock()
	for i := 0; i < maxNamedTailers; i++ {
		if q.slotNamed(i, name) {
			q.tailerWord(i, 0).Store(0)
			return nil
		}
	}
	return fmt.Errorf("%w: no tailer named %q", ErrNotFound, name)
}

// Ack records the tailer's position, so that a named tailer opened later
// (after a restart) continues from here: every message read so far counts
// as processed. For an anonymous tailer it does nothing.
func (t *Tailer) Ack() error {
	if t.slot < 0 {
		return nil
	}
	if t.q.readOnly {
		return ErrReadOnly
	}
	t.q.tailerWord(t.slot, 8).Store(t.Index() + 1)
	return nil
}
