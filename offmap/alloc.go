package offmap

import "math/bits"

// The free-chunk bitmap of a segment has one bit per chunk, 1 = used. It is
// only read and written with the segment lock held, and it is derived: a
// repair rebuilds it from the entries the slots reference.

// allocLocked finds n free contiguous chunks, next-fit from the hint,
// marks them used and returns the first.
func (m *Map) allocLocked(s *segment, n int) (uint32, bool) {
	hint := s.hdr.allocHint.Load()
	c, ok := allocRun(m.bitmap(s), &hint, int(m.hdr.ChunksPerSegment), n)
	if ok {
		s.hdr.allocHint.Store(hint)
	}
	return c, ok
}

// allocRun is allocLocked on a bitmap and a hint: UpdateKeys runs it on
// copies first, to learn whether all its allocations will succeed.
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

func (m *Map) freeLocked(s *segment, c uint32, n int) {
	clearRun(m.bitmap(s), int(c), n)
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
