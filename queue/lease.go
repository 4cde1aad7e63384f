package queue

import "github.com/offmap/offmap/internal/shm"

// takeLease gives this process a writer lease: a slot in the metadata
// file's lease table holding its token, and a new generation. Slot
// headers name the lease, so a reader can tell whether their writer died.
func (q *Queue) takeLease() error {
	if q.leaseIdx >= 0 {
		return nil
	}
	if _, err := q.lock.Lock(q.witness, 0); err != nil {
		return err
	}
	defer q.lock.Unlock()
	free := -1
	for i := 0; i < maxLeases; i++ {
		tok := q.leases[2*i].Load()
		if tok == 0 || !q.witness.Alive(shm.Token(tok)) {
			free = i
			if tok == 0 {
				break
			}
		}
	}
	if free < 0 {
		return ErrTooManyWriters
	}
	gen := (q.leases[2*free+1].Load() + 1) & genMask
	if gen == 0 {
		gen = 1
	}
	q.leases[2*free+1].Store(gen)
	q.leases[2*free].Store(uint64(q.witness.Token()))
	q.leaseIdx = free
	q.writerBits = uint64(free)<<leaseShift | gen<<genShift
	return nil
}

func (q *Queue) releaseLease() {
	if q.leaseIdx < 0 {
		return
	}
	q.leases[2*q.leaseIdx].CompareAndSwap(uint64(q.witness.Token()), 0)
	q.leaseIdx = -1
}

// writerDead reports whether the writer named by a busy header is gone:
// its lease was released or taken by another process, or its process
// died.
func (q *Queue) writerDead(h uint64) bool {
	i := int(h >> leaseShift & 0xff)
	gen := h >> genShift & genMask
	tok := q.leases[2*i].Load()
	if tok == 0 || q.leases[2*i+1].Load() != gen {
		return true
	}
	return !q.witness.Alive(shm.Token(tok))
}

// recoverAlone clears what dead processes left in the metadata file: their
// writer leases, the lock, and their count among the doorbell's sleepers.
// Only a process that holds the flock exclusively may call it: then no
// other process has the queue open, and every holder is dead, whatever
// its token says.
func (q *Queue) recoverAlone() {
	q.sleepers.Store(0)
	for i := 0; i < maxLeases; i++ {
		q.leases[2*i].Store(0)
	}
	if owner := q.lock.Owner(); owner != 0 {
		q.lock.ForceUnlock(owner)
	}
	q.lock.ResetSleepers()
}
