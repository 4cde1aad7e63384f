package offmap

import (
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
)

func slotHome(w uint64) uint32 { return uint32((w & slotHomeMask) >> slotHomeShift) }

// keyHash is where a key lives: its segment, and the slot word a live
// entry of it has in the match bits.
type keyHash struct {
	seg   uint32
	home  uint32
	match uint64
}

// hash is the key's hash in this file: xxhash64 of the key, xored with the
// file's seed and mixed (part of the format). The seed gives every file its
// own slot layout.
func (m *Map) hash(key []byte) keyHash {
	return m.split(mixSeed(xxhash.Sum64(key), m.hdr.Seed))
}

func mixSeed(h, seed uint64) uint64 {
	h ^= seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// split derives segment, home slot and tag from independent parts of the
// 64-bit hash (multiply-shift maps a 32-bit part onto [0, n)).
func (m *Map) split(h uint64) keyHash {
	seg := uint32(uint64(uint32(h>>32)) * uint64(m.hdr.Segments) >> 32)
	home := uint32(uint64(uint32(h)) * uint64(m.hdr.SlotsPerSegment) >> 32)
	tag := (h * 0x9E3779B97F4A7C15) >> 51
	return keyHash{seg: seg, home: home, match: slotUsed | uint64(home)<<slotHomeShift | tag<<slotTagShift}
}

// segment is a view of one segment's memory. It is computed from the
// hash on each operation (segment), not loaded from a table, so that a
// lookup's first memory accesses depend on nothing but the key; what only
// writers need (bitmap, scratch) is computed when they ask.
type segment struct {
	idx   int
	base  int // of the segment's data in the mapping
	hdr   *segmentHeader
	slots []atomic.Uint64
	area  []byte
	// inTx: a multi-key update holds the version odd for all of its
	// changes; the single changes inside it leave the version alone.
	inTx bool
}

func (m *Map) segment(i uint32) segment {
	h := &m.hdr
	base := int(h.SegmentsOff) + int(i)*int(h.SegmentStride)
	area := base + int(h.AreaOff)
	return segment{
		idx:   int(i),
		base:  base,
		hdr:   shm.Overlay[segmentHeader](m.mem, int(h.SegHeadersOff)+int(i)*segmentHeaderSize),
		slots: shm.U64s(m.mem, base, int(h.SlotsPerSegment)),
		area:  m.mem[area : area+int(h.ChunksPerSegment)<<m.chunkShift],
	}
}

// bitmap is s's free-chunk bitmap; only touched with the lock held.
func (m *Map) bitmap(s *segment) []uint64 {
	return shm.Words(m.mem, s.base+int(m.hdr.BitmapOff), int((m.hdr.ChunksPerSegment+63)/64))
}

// scratch is s's redo record.
func (m *Map) scratch(s *segment) []byte {
	return m.mem[s.base+int(m.hdr.ScratchOff) : s.base+int(m.hdr.AreaOff)]
}

// entry is the location of an entry in a segment's entry space, checked
// against the segment's bounds (layout in format.go).
type entry struct {
	off    int // of the header in the segment's area
	keyLen int
	valLen int
}

func (e entry) keyOff() int { return e.off + entryHeaderSize }
func (e entry) valOff() int { return e.off + entryHeaderSize + shm.Pad8(e.keyLen) }
func (e entry) size() int   { return entryBytes(e.keyLen, e.valLen) }

// entryAt reads the entry at chunk c. It returns ok=false when anything in
// it lies outside the segment or over the map's limits: a torn read of a
// concurrent change, or a damaged file.
func (m *Map) entryAt(s *segment, c uint32) (entry, bool) {
	off := int(c) << m.chunkShift
	if c >= uint32(m.hdr.ChunksPerSegment) || off+entryHeaderSize > len(s.area) {
		return entry{}, false
	}
	e := entry{
		off:    off,
		keyLen: int(shm.U32(s.area, off).Load()),
		valLen: int(shm.U32(s.area, off+4).Load()),
	}
	if e.keyLen > int(m.hdr.MaxKey) || e.valLen > int(m.hdr.MaxValue) || e.off+e.size() > len(s.area) {
		return entry{}, false
	}
	return e, true
}

func (m *Map) chunksFor(keyLen, valLen int) int {
	return (entryBytes(keyLen, valLen) + int(m.hdr.ChunkSize) - 1) >> m.chunkShift
}

// find looks key up in s. It returns the slot index and word of the live
// entry (found), or the first empty slot of the probe sequence (where an
// insert goes). bad reports bytes outside the segment's bounds, or a table
// without an empty slot: under a seqlock a torn read, otherwise damage.
// It is the heart of every operation, kept lean so that the CPU can overlap
// the cache misses of consecutive lookups.
func (m *Map) find(s *segment, key []byte, h keyHash) (pos uint32, w uint64, e entry, found, bad bool) {
	slots, area := s.slots, s.area
	n := uint32(len(slots))
	i := h.home
	for range n {
		w = slots[i].Load()
		if w&slotMatch == h.match {
			off := int(slotChunk(w)) << m.chunkShift
			if off <= len(area)-entryHeaderSize {
				hw := shm.U64(area, off).Load() // key length | value length << 32
				kl, vl := int(uint32(hw)), int(hw>>32)
				if kl > int(m.hdr.MaxKey) || vl > int(m.hdr.MaxValue) || off+entryBytes(kl, vl) > len(area) {
					bad = true
				} else if kl == len(key) && shm.Equal(area[off+entryHeaderSize:], key) {
					return i, w, entry{off: off, keyLen: kl, valLen: vl}, true, false
				}
			} else {
				bad = true
			}
		} else if w == 0 {
			return i, 0, entry{}, false, bad
		}
		if i++; i == n {
			i = 0
		}
	}
	return 0, 0, entry{}, false, true
}

// writeEntry stores key and value as a new entry at chunk c.
func (m *Map) writeEntry(s *segment, c uint32, key, value []byte) entry {
	e := entry{off: int(c) << m.chunkShift, keyLen: len(key), valLen: len(value)}
	shm.U32(s.area, e.off).Store(uint32(len(key)))
	shm.U32(s.area, e.off+4).Store(uint32(len(value)))
	shm.Store(s.area[e.keyOff():], key)
	shm.Store(s.area[e.valOff():], value)
	return e
}

// loadValue appends e's value to dst. Values of up to 8 bytes are read
// with one atomic load, so that a value handle's concurrent store is seen
// whole.
func loadValue(dst []byte, s *segment, e entry) []byte {
	n := len(dst)
	if cap(dst)-n < e.valLen {
		dst = append(dst[:n:n], make([]byte, e.valLen)...)
	} else {
		dst = dst[:n+e.valLen]
	}
	if e.valLen == 0 {
		return dst // an empty value has no value word
	}
	if e.valLen <= 8 {
		w := shm.U64(s.area, e.valOff()).Load()
		if e.valLen == 8 {
			putWord(dst[n:], w)
		} else {
			for i := range e.valLen {
				dst[n+i] = byte(w >> (8 * i))
			}
		}
	} else {
		shm.Load(dst[n:], s.area[e.valOff():])
	}
	return dst
}

// scratchLen returns the value length in s's redo record, or -1 if it is
// over the map's limit (only damage does that).
func (m *Map) scratchLen(s *segment) int {
	n := shm.U64(m.scratch(s), 0).Load()
	if n > uint64(m.hdr.MaxValue) {
		return -1
	}
	return int(n)
}

// loadKey copies e's key into dst (len(dst) == e.keyLen).
func loadKey(dst []byte, s *segment, e entry) { shm.Load(dst, s.area[e.keyOff():]) }
