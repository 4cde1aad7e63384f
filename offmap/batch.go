package offmap

import (
	"sync"

	"github.com/offmap/offmap/internal/shm"
)

// getManyBatch is how many lookups GetMany overlaps: enough to keep the
// memory system busy (a core tracks some 10-20 outstanding misses), few
// enough that the lines prefetched for the first are still in cache when
// it is read.
const getManyBatch = 16

// GetMany looks keys up and calls fn with each key's index in keys, its
// value and whether it was found, in order. It gives each key what Get
// would (every value read at one instant of its own, as by Get; use
// ViewKeys for one instant for all), several times faster on a large map:
// it works through the keys in batches, bringing in the slot and then the
// entry of every key of a batch before it reads any, so that their cache
// misses overlap instead of following one another. value is a copy valid
// only during the call to fn. It allocates nothing once warm, and returns
// the first error (ErrClosed, ErrCorrupt), after which fn is not called.
func (m *Map) GetMany(keys [][]byte, fn func(i int, value []byte, found bool)) error {
	bp := getManyBufs.Get().(*[]byte)
	defer getManyBufs.Put(bp)
	var hs [getManyBatch]keyHash
	var at [getManyBatch]int // each key's home slot (offset in mem), or -1
	for start := 0; start < len(keys); start += getManyBatch {
		if m.closed.Load() {
			return ErrClosed
		}
		batch := keys[start:min(start+getManyBatch, len(keys))]
		mem := m.current()
		// Each stage reads what the one before brought in, for every key
		// of the batch, and prefetches what the next one reads.
		for j, k := range batch {
			hs[j] = m.hash(k)
			shm.Prefetch(m.mem, m.segHeaderOff(hs[j].seg))
		}
		for j := range batch {
			at[j] = m.homeSlot(mem, hs[j])
			shm.Prefetch(mem, at[j])
		}
		for j := range batch {
			if at[j] >= 0 {
				m.prefetchEntry(mem, hs[j], at[j])
			}
		}
		for j, k := range batch {
			if len(k) > int(m.hdr.MaxKey) {
				fn(start+j, nil, false)
				continue
			}
			v, found, err := m.readHashed((*bp)[:0], k, hs[j], true)
			if err != nil {
				return err
			}
			*bp = v
			if !found {
				v = nil
			}
			fn(start+j, v, found)
		}
	}
	return nil
}

var getManyBufs = sync.Pool{New: func() any { return new([]byte) }}

func (m *Map) segHeaderOff(seg uint32) int {
	return int(m.hdr.SegHeadersOff) + int(seg)*segmentHeaderSize
}

// segBase is the offset of segment seg's initial body.
func (m *Map) segBase(seg uint32) int {
	return int(m.hdr.SegmentsOff) + int(seg)*int(m.hdr.SegmentStride)
}

// homeSlot returns the offset in mem of the home slot of hash h in its
// segment's current table, or -1 if that table does not fit the mapping
// (the lookup itself then finds out why). A prefetch only: what it reads
// may be torn, and readHashed reads it again under the seqlock.
func (m *Map) homeSlot(mem []byte, h keyHash) int {
	sh := shm.Overlay[segmentHeader](m.mem, m.segHeaderOff(h.seg))
	base := m.segBase(h.seg)
	slots, n := m.tableOf(base, sh.table.Load())
	if !m.tableFits(slots, n, len(mem), base) {
		return -1
	}
	return slots + int(homeIn(h.match, n))*8
}

// prefetchFirstHome starts bringing in h's home slot in the first table of
// its segment, before the segment's header, which says where its
// table is, has come in: the two misses overlap. A segment that has not
// grown, as in a map made at its size, still has its first table.
func (m *Map) prefetchFirstHome(h keyHash) {
	base := m.segBase(h.seg)
	shm.Prefetch(m.mem, base+int(homeIn(h.match, int(m.hdr.SlotsPerSegment)))*8)
}

// prefetchEntry starts bringing in the entry that the home slot at off
// names, if the slot holds h's tag (most keys are found in their home
// slot) and the entry lies in the segment's first extent.
func (m *Map) prefetchEntry(mem []byte, h keyHash, off int) {
	w := shm.U64(mem, off).Load()
	if w&m.matchBits != h.match {
		return
	}
	if c := slotChunk(w); uint64(c) < m.hdr.ChunksPerSegment {
		base := m.segBase(h.seg)
		shm.Prefetch(mem, base+int(m.hdr.AreaOff)+int(c)<<m.chunkShift)
	}
}
