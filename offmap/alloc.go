package offmap

import "math/bits"

// The free-chunk bitmap of a segment has one bit per chunk, 1 = used. It is
// only read and written with the segment lock held, and it is derived: a
// repair rebuilds it from the entries the slots reference.

// extentBitmaps fills bms with the bitmaps of s's extents, 0 first, and
// returns how many there are.
func (m *Map) extentBitmaps(s *segment, bms *[maxExtents + 1][]uint64) int {
	n := 0
	for n <= m.maxExtent() {
		if bms[n] = m.bitmap(s, n); bms[n] == nil {
			break
		}
		n++
	}
	return n
}

// allocLocked finds n free contiguous chunks in one of s's extents,
// next-fit from the hint, marks them used and returns the first.
func (m *Map) allocLocked(s *segment, n int) (uint32, bool) {
	var bms [maxExtents + 1][]uint64
	k := m.extentBitmaps(s, &bms)
	hint := s.hdr.allocHint.Load()
	c, ok := m.allocIn(bms[:k], &hint, n)
	if ok {
		s.hdr.allocHint.Store(hint)
	}
	return c, ok
}

// allocIn is allocLocked on the bitmaps of a segment's extents and a
// hint: UpdateKeys runs it on copies first, to learn whether all its
// allocations will succeed. It tries the hint's extent first, then the
// others in turn.
func (m *Map) allocIn(bms [][]uint64, hint *uint64, n int) (uint32, bool) {
	first, from := 0, 0
	if *hint < 1<<32 {
		if k, i := m.extentOf(uint32(*hint)); k >= 0 && k < len(bms) {
			first, from = k, i
		}
	}
	for j := range bms {
		k := (first + j) % len(bms)
		total := int(m.hdr.ChunksPerSegment)
		if k > 0 {
			total = m.extentChunks(k)
		}
		local := uint64(0)
		if j == 0 {
			local = uint64(from)
		}
		if i, ok := allocRun(bms[k], &local, total, n); ok {
			*hint = uint64(m.chunkNumber(k, 0)) + local
			return m.chunkNumber(k, int(i)), true
		}
	}
	return 0, false
}

// chunkNumber is the number of chunk i of extent k.
func (m *Map) chunkNumber(k, i int) uint32 {
	if k == 0 {
		return uint32(i)
	}
	return uint32(m.extentChunks(k) + i)
}

// allocRun finds n free contiguous chunks in one bitmap of total chunks,
// next-fit from hint, marks them and returns the first.
func allocRun(bm []uint64, hint *uint64, total, n int) (uint32, bool) {
	from := 0
	if *hint < uint64(total) {
		from = int(*hint)
	}
	c, ok := findRun(bm, from, total, n)
	if !ok {
		c, ok = findRun(bm, 0, min(from+n-1, total), n)
	}
	if !ok {
		return 0, false
	}
	setRun(bm, c, n)
	*hint = uint64(c + n)
	return uint32(c), true
}

// freeLocked marks the n chunks from c free.
func (m *Map) freeLocked(s *segment, c uint32, n int) {
	if k, i := m.extentOf(c); k >= 0 {
		if bm := m.bitmap(s, k); bm != nil {
			clearRun(bm, i, n)
		}
	}
}

// findRun returns the first i in [from, to-n] such that bits [i, i+n) are
// all clear.
func findRun(bm []uint64, from, to, n int) (int, bool) {
	i := from
	for i+n <= to {
		i = nextClear(bm, i, to)
		if i+n > to {
			return 0, false
		}
		j := nextSet(bm, i, i+n)
		if j == i+n {
			return i, true
		}
		i = j + 1
	}
	return 0, false
}

// nextClear returns the first clear bit in [i, to), or to.
func nextClear(bm []uint64, i, to int) int {
	for i < to {
		w := ^bm[i>>6] >> (i & 63)
		if w != 0 {
			return min(i+bits.TrailingZeros64(w), to)
		}
		i = (i | 63) + 1
	}
	return to
}

// nextSet returns the first set bit in [i, to), or to.
func nextSet(bm []uint64, i, to int) int {
	for i < to {
		w := bm[i>>6] >> (i & 63)
		if w != 0 {
			return min(i+bits.TrailingZeros64(w), to)
		}
		i = (i | 63) + 1
	}
	return to
}

func setRun(bm []uint64, i, n int)   { forRun(i, n, func(k int, mask uint64) { bm[k] |= mask }) }
func clearRun(bm []uint64, i, n int) { forRun(i, n, func(k int, mask uint64) { bm[k] &^= mask }) }

// forRun calls f with the word index and bit mask of each word that bits
// [i, i+n) touch.
func forRun(i, n int, f func(k int, mask uint64)) {
	for n > 0 {
		b := i & 63
		take := min(64-b, n)
		mask := ^uint64(0)
		if take < 64 {
			mask = (1<<take - 1) << b
		}
		f(i>>6, mask)
		i += take
		n -= take
	}
}

// runIsClear reports whether bits [i, i+n) are all clear.
func runIsClear(bm []uint64, i, n int) bool {
	ok := true
	forRun(i, n, func(k int, mask uint64) { ok = ok && bm[k]&mask == 0 })
	return ok
}
