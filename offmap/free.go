package offmap

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/offmap/offmap/internal/shm"
)

// Reuse of freed slot tables. A segment that moves to a larger table
// leaves its old one behind; in a map that grew from a small start those
// tables are a third of the file. A map with flagReuse keeps up to
// freeWordCount such regions in the header page (format.go) and hands
// them to the next growth step of any segment that fits, before it takes
// space at the end of the file.
//
// Each free word names one region: its offset / 64 in bits 24-63 and its
// size / 64 in bits 0-23. Taking from a region and putting one back are
// single compare-and-swaps on a word, and a region is always removed from
// a word before its bytes are published anywhere else, so a process
// killed at any instant leaves a region in at most one place: named by a
// segment, in a word, or (lost until offmap copy) in neither.
//
// Why it is safe for readers that take no lock: a reader that loaded a
// table word before the table was replaced may go on probing the old
// table while another segment writes into it. Every offset it reads there
// is bounds-checked, its probe ends after n slots, and the segment's
// version changed when the new table was published, so its version check
// fails and it retries (read.go). Readers of an evicting map write into
// slots without the lock (their access counts), so such maps never reuse.
//
// The free-list changes word (a growth word) counts every take and every
// put: Check and Recover, which read the segment headers and free words
// without the segments' locks, read them again until that count holds
// still, so that a region moving from one place to another is never seen
// in both.

const (
	freeSizeBits = 24
	maxFreeBytes = (1<<freeSizeBits - 1) * 64
)

func freeWord(off, n int) uint64 { return uint64(off)/64<<freeSizeBits | uint64(n/64) }

func freeAt(w uint64) (off, n int) {
	return int(w>>freeSizeBits) * 64, int(w&(1<<freeSizeBits-1)) * 64
}

// freeWords returns the header's free-region words.
func (m *Map) freeWords() []atomic.Uint64 {
	return shm.U64s(m.mem, freeWordsOff, freeWordCount)
}

// freeFits reports whether a free word's region can be handed out: inside
// the claimed growth area, 64-aligned, not empty.
func (m *Map) freeFits(off, n int) bool {
	return n > 0 && off%64 == 0 && off >= int(m.hdr.FileSize) && off <= int(m.growth().allocEnd.Load())-n
}

// takeFree returns the offset of n bytes (a multiple of 64) taken from
// the smallest free region that holds them, zeroed and mapped, or false
// when none does.
func (m *Map) takeFree(n int) (int, bool) {
	if !m.reuse || !m.validAllocEnd(m.growth().allocEnd.Load()) {
		// Damage to AllocEnd (claim reports it): Recover moves it past
		// the free regions first, so leave them where they are.
		return 0, false
	}
	words := m.freeWords()
	for {
		best, bestW, bestN := -1, uint64(0), 0
		for i := range words {
			w := words[i].Load()
			if _, size := freeAt(w); w != 0 && size >= n && (best < 0 || size < bestN) {
				best, bestW, bestN = i, w, size
			}
		}
		if best < 0 {
			return 0, false
		}
		off, size := freeAt(bestW)
		if !m.freeFits(off, size) {
			// Damage (Check reports it): drop the word, leaving the space
			// unused.
			words[best].CompareAndSwap(bestW, 0)
			continue
		}
		rest := uint64(0)
		if size > n {
			rest = freeWord(off+n, size-n)
		}
		if !words[best].CompareAndSwap(bestW, rest) {
			continue
		}
		m.growth().freeChanges.Add(1)
		crash("grow.reuse.taken")
		// A damaged word could name space a segment uses: then the space
		// is left alone. (A segment that named it before, and put it
		// back, published its replacement first: what it names now was
		// stored before this read.)
		if m.namedOverlaps(off, off+n) {
			continue
		}
		if !m.storeFor(off, n) {
			m.putFree(off, n)
			return 0, false
		}
		if len(m.current()) < off+n && !m.mapsPast(off+n-1) {
			m.putFree(off, n)
			return 0, false
		}
		shm.Zero(m.current()[off : off+n])
		m.growth().reused.Add(1)
		return off, true
	}
}

// storeFor makes sure the taken region [off, off+n) has storage: a file
// cut short under this process may have lost the freed space. It does
// not extend a file cut through a table or extent a segment names (Check
// reports that cut, Recover says what it lost). Grow writes, where it
// must, only over this region, which is this process's now.
func (m *Map) storeFor(off, n int) bool {
	if m.file == nil {
		return true
	}
	size, err := m.statSize()
	if err != nil {
		return false
	}
	if size >= off+n {
		return true
	}
	for _, r := range m.grownRegions() {
		if r.end > size {
			return false
		}
	}
	return shm.Grow(m.file, int64(off), int64(n)) == nil
}

// putFree gives the n bytes at off, which no segment names any more, to
// the free list, merged with the free regions next to them. When every
// word is taken the region stays unused (offmap copy reclaims it).
func (m *Map) putFree(off, n int) {
	if !m.reuse || off < int(m.hdr.FileSize) || n <= 0 {
		return
	}
	words := m.freeWords()
	for merged := true; merged; {
		merged = false
		for i := range words {
			w := words[i].Load()
			o, size := freeAt(w)
			if w == 0 || size+n > maxFreeBytes || o+size != off && off+n != o {
				continue
			}
			// The neighbour is this process's alone once out of its word.
			if words[i].CompareAndSwap(w, 0) {
				off, n, merged = min(o, off), n+size, true
				crash("grow.free.merging")
			}
		}
	}
	for n > 0 {
		w := freeWord(off, min(n, maxFreeBytes))
		m.growth().freeChanges.Add(1) // before it shows: see the top of the file
		i := 0
		for i < len(words) && words[i].Load() != 0 {
			i++
		}
		if i == len(words) {
			return
		}
		if words[i].CompareAndSwap(0, w) {
			_, taken := freeAt(w)
			off, n = off+taken, n-taken
		}
	}
}

// namedOverlaps reports whether a table or extent that a segment header
// names overlaps [off, end).
func (m *Map) namedOverlaps(off, end int) bool {
	for _, r := range m.grownRegions() {
		if r.off < end && off < r.end {
			return true
		}
	}
	return false
}

// betweenLooks, when set by a test, runs between growthSnapshot's reads
// of the segment headers and of the free words.
var betweenLooks func()

// freeRegion is a region a free word names.
type freeRegion struct {
	off, end, word int
}

// growthSnapshot reads the regions the segment headers name and those the
// free words name, again until no region moved between the two reads (the
// free-list changes count held still), at most tries times. stable is
// false if it never did.
func (m *Map) growthSnapshot(tries int) (named []grownRegion, free []freeRegion, stable bool) {
	g := m.growth()
	for try := 0; ; try++ {
		c := g.freeChanges.Load()
		named, free = m.grownRegions(), free[:0]
		if betweenLooks != nil {
			betweenLooks()
		}
		if m.reuse {
			for i := range freeWordCount {
				if w := m.freeWords()[i].Load(); w != 0 {
					off, n := freeAt(w)
					free = append(free, freeRegion{off, off + n, i})
				}
			}
		}
		if g.freeChanges.Load() == c {
			return named, free, true
		}
		if try >= tries {
			return named, free, false
		}
		shm.Yield()
	}
}

// freeInFile reports whether free region f lies where a freed table can:
// 64-aligned, not empty, within the growth area's first size bytes (the
// file's; a freed table had storage) and MaxFileSize.
func (m *Map) freeInFile(f freeRegion, size int) bool {
	return f.end > f.off && f.off%64 == 0 && f.off >= int(m.hdr.FileSize) && f.end <= min(size, m.limit)
}

// checkFree checks the free words against the growth area of a file of
// size bytes and the regions kept (named, sorted by offset, each sound):
// every free region lies inside it and inside the claimed space, and
// overlaps no region a segment names and no other free region. With fix
// set it clears the words that fail, which leaves their space unused:
// nothing is lost; and it moves the claimed space's end past a region
// that is sound but lies past it.
func (m *Map) checkFree(named []grownRegion, free []freeRegion, size int, fix bool) []string {
	var p []string
	slices.SortFunc(free, func(a, b freeRegion) int { return cmp.Or(cmp.Compare(a.off, b.off), cmp.Compare(a.word, b.word)) })
	end := 0 // of the free regions kept so far
	for _, f := range free {
		why := ""
		switch {
		case !m.freeInFile(f, size):
			why = fmt.Sprintf("[%d, %d) lies outside the file's growth area [%d, %d)", f.off, f.end, m.hdr.FileSize, min(size, m.limit))
		case f.off < end:
			why = fmt.Sprintf("[%d, %d) overlaps another free region", f.off, f.end)
		default:
			for _, r := range named {
				if r.off < f.end && f.off < r.end && !(r.k == -1 && r.off < int(m.hdr.FileSize)) {
					why = fmt.Sprintf("[%d, %d) overlaps the %s at %d", f.off, f.end, r.what(), r.off)
					break
				}
			}
		}
		if why == "" {
			end = f.end
			if a := m.growth().allocEnd.Load(); f.end > int(a) && m.validAllocEnd(a) {
				// Past the claimed space (damage to AllocEnd, no checksum
				// covers it): raised, as for a table kept there.
				if fix {
					raiseAllocEnd(m.growth(), f.end)
				}
				p = append(p, fmt.Sprintf("header: free word %d: [%d, %d) lies past the claimed space, which ends at %d; %s", f.word, f.off, f.end, a,
					fixWord(fix, "the claimed space's end moved past it", "recover moves the claimed space's end past it")))
			}
			continue
		}
		w := freeWord(f.off, f.end-f.off)
		if fix {
			m.freeWords()[f.word].CompareAndSwap(w, 0)
		}
		p = append(p, fmt.Sprintf("header: free word %d: %s; %s", f.word, why,
			fixWord(fix, "cleared (its space stays unused)", "recover clears it (its space stays unused)")))
	}
	return p
}

// reusableBytes is the space the free words hold.
func (m *Map) reusableBytes() int64 {
	var n int64
	if m.reuse {
		for i := range freeWordCount {
			if w := m.freeWords()[i].Load(); w != 0 {
				_, size := freeAt(w)
				n += int64(size)
			}
		}
	}
	return n
}
