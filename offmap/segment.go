package offmap

import (
	"math/bits"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
)

// keyHash is where a key lives: its segment, and the slot word a live
// entry of it has in the match bits.
type keyHash struct {
	seg   uint32
	match uint64 // used | hash fraction | tag: its home in any table
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

// split derives segment, hash fraction and tag from independent parts of
// the 64-bit hash (multiply-shift maps a 32-bit part onto [0, n)).
func (m *Map) split(h uint64) keyHash {
	seg := uint32(uint64(uint32(h>>32)) * uint64(m.hdr.Segments) >> 32)
	frac := uint64(uint32(h)) >> (32 - slotFracBits)
	tag := (h * 0x9E3779B97F4A7C15) >> (64 - 9)
	return keyHash{seg: seg, match: (slotUsed | frac<<slotFracShift | tag<<slotTagShift) & m.matchBits}
}

// segment is a view of one segment's memory. It is computed from the
// hash on each operation (segment), not loaded from a table, so that a
// lookup's first memory accesses depend on nothing but the key. Its slot
// table is the one the header named when loadTable last ran: readers run
// it after each version load, writers after taking the lock.
type segment struct {
	idx   int
	base  int // of the segment's initial body in the file
	hdr   *segmentHeader
	mem   []byte // the mapped file, as far as this process has it
	slots []atomic.Uint64
	// inTx: a multi-key update holds the version odd for all of its
	// changes; the single changes inside it leave the version alone.
	inTx bool
	// expires is the expiry time this operation's writes give entries
	// (Unix nanoseconds, 0 = never), where entries have one; now is the
	// clock reading it judges expiry by (0: readers read the clock).
	expires, now int64
	// ownExpiry: expires was asked for (PutTTL, PutExpiring), not the
	// map's TTL, which a pinned entry does not take.
	ownExpiry bool
	// evicted: this operation evicted entries, which may have moved the
	// slots it found; protect is 1 + the chunk of the entry it is
	// changing, which eviction must leave alone (evict.go).
	evicted bool
	protect uint32
	// protectAll: the chunks of the entries an UpdateKeys read, which
	// eviction must leave alone too.
	protectAll []uint32
}

func (m *Map) segment(i uint32) segment {
	h := &m.hdr
	s := segment{
		idx:  int(i),
		base: m.segBase(i),
		hdr:  shm.Overlay[segmentHeader](m.mem, int(h.SegHeadersOff)+int(i)*segmentHeaderSize),
	}
	m.loadTable(&s)
	return s
}

// loadTable points s at the slot table its header names, mapping more of
// the file if another process grew it. It returns false, with no slots,
// when the table lies outside the file's growth area or initial bodies:
// a torn read of a change, or damage.
func (m *Map) loadTable(s *segment) bool {
	s.mem = m.current()
	off, n := m.tableOf(s.base, s.hdr.table.Load())
	if !m.tableFits(off, n, len(s.mem), s.base) {
		if !m.tableFits(off, n, m.limit, s.base) || !m.mapsPast(len(s.mem)) {
			s.slots = nil
			return false
		}
		s.mem = m.current()
		if !m.tableFits(off, n, len(s.mem), s.base) {
			s.slots = nil
			return false
		}
	}
	s.slots = shm.U64s(s.mem, off, n)
	return true
}

// tableOf decodes a table word; 0 names the segment's first table, in its
// initial body at base, so that a zero-filled header is a valid segment.
func (m *Map) tableOf(base int, w uint64) (off, n int) {
	if w == 0 {
		return base, int(m.hdr.SlotsPerSegment)
	}
	return tableAt(w)
}

// tableFits reports whether a table of n slots at off can be the table of
// the segment whose initial body is at base: its first table, or one in
// the growth area within the first size bytes.
func (m *Map) tableFits(off, n, size, base int) bool {
	if off < int(m.hdr.FileSize) {
		return off == base && n == int(m.hdr.SlotsPerSegment)
	}
	return n >= 2 && n <= maxSlotsLimit && off%64 == 0 && off <= size-8*n
}

// bitmap is the free-chunk bitmap of extent k of s; only touched with the
// lock held. It is nil if the extent does not exist or is out of bounds.
func (m *Map) bitmap(s *segment, k int) []uint64 {
	if k == 0 {
		return shm.Words(m.mem, s.base+int(m.hdr.BitmapOff), int((m.hdr.ChunksPerSegment+63)/64))
	}
	off, ok := m.extentAt(s, k)
	if !ok {
		return nil
	}
	return shm.Words(s.mem, off, (m.extentChunks(k)+63)/64)
}

// extentAt returns the offset of extent k >= 1 of s, if s has it and it
// lies in the mapped growth area.
func (m *Map) extentAt(s *segment, k int) (int, bool) { return m.extentIn(s.mem, s.hdr, k) }

func (m *Map) extentIn(mem []byte, sh *segmentHeader, k int) (int, bool) {
	off := int(sh.extents[k-1].Load())
	if off == 0 || off%64 != 0 || off < int(m.hdr.FileSize) || off > len(mem)-m.extentBytes(k) {
		return 0, false
	}
	return off, true
}

// extentOf returns the extent that chunk c belongs to and c's index in
// it, or k = -1 for a number no extent has.
func (m *Map) extentOf(c uint32) (k int, i int) {
	if uint64(c) < m.hdr.ChunksPerSegment {
		return 0, int(c)
	}
	k = bits.Len32(c) - m.extBits
	if k < 1 || k > m.maxExtent() {
		return -1, 0
	}
	return k, int(c) - m.extentChunks(k)
}

// chunkAt returns the offset in s.mem of chunk c and the end of its
// extent's entry space.
func (m *Map) chunkAt(s *segment, c uint32) (off, end int, ok bool) {
	return m.locate(s.mem, s.hdr, s.base, c)
}

// locate is chunkAt for the segment with header sh and initial body at
// base, in mem.
func (m *Map) locate(mem []byte, sh *segmentHeader, base int, c uint32) (off, end int, ok bool) {
	if uint64(c) < m.hdr.ChunksPerSegment {
		area := base + int(m.hdr.AreaOff)
		return area + int(c)<<m.chunkShift, area + m.area0Len, true
	}
	k, i := m.extentOf(c)
	if k < 1 {
		return 0, 0, false
	}
	x, ok := m.extentIn(mem, sh, k)
	if !ok {
		return 0, 0, false
	}
	area := x + m.extentBitmapBytes(k)
	return area + i<<m.chunkShift, area + m.extentChunks(k)<<m.chunkShift, true
}

// scratch is s's redo record.
func (m *Map) scratch(s *segment) []byte {
	return m.mem[s.base+int(m.hdr.ScratchOff) : s.base+int(m.hdr.AreaOff)]
}

// entry is the location of an entry in the mapped file, checked against
// its extent's bounds (layout in format.go).
type entry struct {
	off    int // of the header in the mapping
	keyLen int
	valLen int
}

func (e entry) keyOff() int { return e.off + entryHeaderSize }
func (e entry) valOff() int { return e.off + entryHeaderSize + shm.Pad8(e.keyLen) }
func (e entry) sumOff() int { return e.valOff() + shm.Pad8(e.valLen) }

// expOff is the offset of e's expiry time (where entries have one).
func (m *Map) expOff(e entry) int {
	if m.sums {
		return e.sumOff() + 8
	}
	return e.sumOff()
}

// entryAt reads the entry at chunk c. It returns ok=false when anything in
// it lies outside its extent or over the map's limits: a torn read of a
// concurrent change, or a damaged file.
func (m *Map) entryAt(s *segment, c uint32) (entry, bool) {
	off, end, ok := m.chunkAt(s, c)
	if !ok || off > end-entryHeaderSize {
		return entry{}, false
	}
	e := entry{
		off:    off,
		keyLen: int(shm.U32(s.mem, off).Load()),
		valLen: int(shm.U32(s.mem, off+4).Load()),
	}
	if e.keyLen > int(m.hdr.MaxKey) || e.valLen > int(m.hdr.MaxValue) || e.off+entryBytes(e.keyLen, e.valLen, m.trailer) > end {
		return entry{}, false
	}
	return e, true
}

func (m *Map) chunksFor(keyLen, valLen int) int {
	return (entryBytes(keyLen, valLen, m.trailer) + int(m.hdr.ChunkSize) - 1) >> m.chunkShift
}

// find looks key up in s. It returns the slot index and word of the live
// entry (found), or the first empty slot of the probe sequence (where an
// insert goes). bad reports bytes outside the segment's bounds, or a table
// without an empty slot: under a seqlock a torn read, otherwise damage.
// It is the heart of every operation, kept lean so that the CPU can overlap
// the cache misses of consecutive lookups.
func (m *Map) find(s *segment, key []byte, h keyHash) (pos uint32, w uint64, e entry, found, bad bool) {
	slots, mem := s.slots, s.mem
	n := uint32(len(slots))
	if n == 0 {
		return 0, 0, entry{}, false, true
	}
	i := homeIn(h.match, int(n))
	for range n {
		w = slots[i].Load()
		if w&m.matchBits == h.match {
			off, end, ok := m.chunkAt(s, slotChunk(w))
			if ok && off <= end-entryHeaderSize {
				hw := shm.U64(mem, off).Load() // key length | value length << 32
				kl, vl := int(uint32(hw)), int(hw>>32)
				if kl > int(m.hdr.MaxKey) || vl > int(m.hdr.MaxValue) || off+entryBytes(kl, vl, m.trailer) > end {
					bad = true
				} else if kl == len(key) && shm.Equal(mem[off+entryHeaderSize:], key) {
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
// c was just allocated, so it lies in an extent of s.
func (m *Map) writeEntry(s *segment, c uint32, key, value []byte) entry {
	off, _, _ := m.chunkAt(s, c)
	e := entry{off: off, keyLen: len(key), valLen: len(value)}
	shm.U32(s.mem, e.off).Store(uint32(len(key)))
	shm.U32(s.mem, e.off+4).Store(uint32(len(value)))
	shm.Store(s.mem[e.keyOff():], key)
	shm.Store(s.mem[e.valOff():], value)
	m.writeSum(s, e, key, value)
	m.writeExpiry(s, e)
	return e
}

// writeSum stores e's checksum, of key and value, where entries have one.
func (m *Map) writeSum(s *segment, e entry, key, value []byte) {
	if m.sums {
		shm.U64(s.mem, e.sumOff()).Store(uint64(entrySum(key, value)))
	}
}

// writeExpiry stores the operation's expiry time in e, where entries
// have one: each write that stores a value restarts its time to live.
func (m *Map) writeExpiry(s *segment, e entry) {
	if m.expiring {
		shm.U64(s.mem, m.expOff(e)).Store(uint64(s.expires))
		if m.evict && s.expires != 0 {
			m.noteExpiry(s, s.expires)
		}
	}
}

// sumHolds reports whether e's checksum matches its key and value (true
// where entries have none).
func (m *Map) sumHolds(s *segment, e entry) bool {
	if !m.sums {
		return true
	}
	key := s.mem[e.keyOff() : e.keyOff()+e.keyLen]
	value := s.mem[e.valOff() : e.valOff()+e.valLen]
	return shm.U64(s.mem, e.sumOff()).Load() == uint64(entrySum(key, value))
}

// sumRejects reports whether an entry whose slot word is w, read as key
// and value, disagrees with its checksum at sumOff in mem: a write a power
// cut tore, or a damaged length word. Readers return ErrCorrupt rather
// than such bytes. Entries without checksums pass, and so do pinned ones,
// whose values handles change without the lock.
func (m *Map) sumRejects(mem []byte, w uint64, sumOff int, key, value []byte) bool {
	return m.sums && w&slotPinned == 0 && shm.U64(mem, sumOff).Load() != uint64(entrySum(key, value))
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
		w := shm.U64(s.mem, e.valOff()).Load()
		if e.valLen == 8 {
			putWord(dst[n:], w)
		} else {
			for i := range e.valLen {
				dst[n+i] = byte(w >> (8 * i))
			}
		}
	} else {
		shm.Load(dst[n:], s.mem[e.valOff():])
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
func loadKey(dst []byte, s *segment, e entry) { shm.Load(dst, s.mem[e.keyOff():]) }
