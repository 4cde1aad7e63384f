package offmap

import (
	"github.com/offmap/offmap/internal/shm"
)

// openMemory opens a map image held in memory (fuzzing, race tests).
func openMemory(mem []byte, readOnly bool) (*Map, error) {
	h, err := decodeHeader(mem[:min(len(mem), headerSize)], int64(len(mem)))
	if err != nil {
		return nil, err
	}
	// Room to grow past the image, as a file would.
	heap := shm.Heap(min(len(mem)+1<<20, int(h.MaxFileSize)))
	copy(heap, mem)
	return newMap("(memory)", *h, heap, readOnly, shm.LocalWitness(), Options{LockTimeout: -1}), nil
}

// deadToken names a process that cannot exist (pids stop at 2^22).
const deadToken = shm.Token(1<<31 - 1)

// segmentOf returns the segment that key lives in.
func (m *Map) segmentOf(key []byte) *segment {
	s := m.segment(m.hash(key).seg)
	return &s
}

// abandon leaves key's segment as a writer that died there would: the lock
// held by a dead process.
func (m *Map) abandon(key []byte) {
	s := m.segmentOf(key)
	s.hdr.lock.ForceUnlock(s.hdr.lock.Owner())
	s.hdr.lock.TryLock(deadToken)
}

// lockKey takes key's segment lock and returns its unlock.
func (m *Map) lockKey(key []byte) func() {
	s := m.segmentOf(key)
	if err := m.lock(s); err != nil {
		panic(err)
	}
	return s.hdr.lock.Unlock
}
