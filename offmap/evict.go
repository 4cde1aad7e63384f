package offmap

import (
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/offmap/offmap/internal/shm"
)

// Eviction (Options.Evict). A map that evicts holds at most EvictCap
// entries per segment, and its file at most MaxFileSize bytes. A write
// that needs room, in any process, evicts under the segment lock it holds
// anyway, by S3-FIFO (Yang et al., SOSP 2023; docs/MAP.md says why this
// policy): new entries enter a small FIFO; one that leaves it having been
// read more than once moves to the main FIFO, the others are evicted and
// their fingerprints kept as ghosts; a new entry whose fingerprint is a
// recent ghost enters the main FIFO directly; the main FIFO gives an entry
// with a count above 0 another round, one less, and evicts the others.
// A one-time scan of cold keys passes through the small FIFO only, so it
// cannot flush the hot set.
//
// Readers raise an entry's access count, two bits of its slot word, with
// one CAS and only while it is below 3: a hot entry costs its readers no
// write to its slot (each read still adds to its segment's hit or miss
// counter). A CAS on a slot word that changed meanwhile fails, and one
// that succeeds changes nothing but the count, so a reader never writes
// into anything else. A read-only mapping records nothing.
//
// The FIFOs are hints, not the truth. An item names an entry by its
// chunk and hash bits; eviction looks each one up again, and an item
// whose entry moved, was deleted, or that a crash or damage left behind
// is dropped. An entry no item names (its push was cut short by a crash,
// or dropped from a full FIFO) is found again when the FIFOs run dry and
// are rebuilt from the slot table. So eviction changes the map only
// through deleteLocked, whose every step is crash-safe, and nothing a
// process can leave in the FIFOs can make it evict a wrong entry or fail.
//
// The eviction area of a segment, at EvictOff in its initial body, with
// C = EvictCap and R = fifoCap(C). Part of the format.
//
//	off  size  field
//	  0    64  evictControl: FIFO positions, expiry watermark, sweep gate
//	 64    64  evictCounters: hits, misses, evictions, evicted bytes
//	128   8*R  small FIFO: items (below)
//	  .   8*R  main FIFO: items
//	  .   8*C  ghosts: 2C 4-byte words, by fingerprint mod 2C: the high 16
//	           bits of the fingerprint last evicted there, and the ghost
//	           epoch it was evicted in (low 16 bits); 0 for none
//
// FIFO positions count pushes and pops from 0; position p is at index
// p mod size. An item is an entry's slot word without the pinned,
// detached and access-count bits: used bit, hash fraction, tag and chunk;
// its fingerprint is its bits 32-63. The ghosts are a FIFO without a
// queue: ghostTail counts the fingerprints put there, an epoch is
// ghostEpoch(C) of them, and a ghost of this epoch or the one before
// counts (the last 2/3 to 4/3 of as many as the main FIFO holds, as in
// the paper). Looking one up or adding one touches one word.

// evictControl is the first cache line of an eviction area, written only
// with the segment lock held.
type evictControl struct {
	smallHead, smallTail atomic.Uint64
	mainHead, mainTail   atomic.Uint64
	_, ghostTail         atomic.Uint64
	// sweepAt: no entry written since the last sweep expires before it
	// (Unix nanoseconds; 0 when none expires). sweepGate: the eviction
	// count before which no sweep runs again, so that entries that expire
	// one by one do not make every write scan the segment.
	sweepAt   atomic.Uint64
	sweepGate atomic.Uint64
}

// evictCounters count a segment's reads and evictions, for Stats. Hits
// and misses are counted by readers that may write the file.
type evictCounters struct {
	hits, misses, evictions, evictedBytes atomic.Uint64
	_                                     [4]uint64
}

const evictHeadBytes = 128

// The format fixes these sizes; the compiler checks the structs agree.
var (
	_ [64 - unsafe.Sizeof(evictControl{})]byte
	_ [unsafe.Sizeof(evictControl{}) - 64]byte
	_ [64 - unsafe.Sizeof(evictCounters{})]byte
	_ [unsafe.Sizeof(evictCounters{}) - 64]byte
)

// fifoCap is the size of the small and the main FIFO of a segment that
// holds at most c entries: room to spare for the items of entries that
// were deleted and not yet popped.
func fifoCap(c int) int { return c + c/4 + 8 }

// evictAreaBytes is the size of a segment's eviction area, padded to 64.
func evictAreaBytes(c int) int {
	return shm.Pad(evictHeadBytes+2*8*fifoCap(c)+8*c, 64)
}

// ghostEpoch is how many ghosts make an epoch where a segment holds at
// most c entries: two thirds of the main FIFO's share.
func ghostEpoch(c int) uint64 { return uint64(max(mainLimit(c)*2/3, 1)) }

// fifo is a ring of items in the file.
type fifo struct {
	head, tail *atomic.Uint64
	items      []atomic.Uint64
}

// bounds returns the FIFO's positions; ones that no push and pop could
// have left (damage) empty it.
func (q fifo) bounds() (h, t uint64) {
	h, t = q.head.Load(), q.tail.Load()
	if t < h || t-h > uint64(len(q.items)) {
		q.head.Store(t)
		h = t
	}
	return h, t
}

func (q fifo) len() int { h, t := q.bounds(); return int(t - h) }

// push appends x, dropping the oldest item when the FIFO is full.
func (q fifo) push(x uint64) {
	h, t := q.bounds()
	if t-h == uint64(len(q.items)) {
		q.head.Store(h + 1)
	}
	q.items[t%uint64(len(q.items))].Store(x)
	crash("evict.pushed")
	q.tail.Store(t + 1)
}

func (q fifo) pop() (uint64, bool) {
	h, t := q.bounds()
	if h == t {
		return 0, false
	}
	x := q.items[h%uint64(len(q.items))].Load()
	q.head.Store(h + 1)
	return x, true
}

func (q fifo) reset() { q.head.Store(q.tail.Load()) }

// peek returns the item pop would return.
func (q fifo) peek() (uint64, bool) {
	h, t := q.bounds()
	if h == t {
		return 0, false
	}
	return q.items[h%uint64(len(q.items))].Load(), true
}

// evictArea is a view of a segment's eviction area.
type evictArea struct {
	ctl         *evictControl
	ctr         *evictCounters
	small, main fifo
	ghosts      []atomic.Uint32
	epoch       uint64 // ghostEpoch
}

// evictAreas makes the views of every segment's eviction area, once at
// open: they lie in the file's first bytes, which never move.
func (m *Map) evictAreas() []evictArea {
	areas := make([]evictArea, m.hdr.Segments)
	c, r := m.evictCap, fifoCap(m.evictCap)
	for i := range areas {
		off := int(m.hdr.SegmentsOff) + i*int(m.hdr.SegmentStride) + int(m.hdr.EvictOff)
		ctl := shm.Overlay[evictControl](m.mem, off)
		small := off + evictHeadBytes
		areas[i] = evictArea{
			ctl:    ctl,
			ctr:    shm.Overlay[evictCounters](m.mem, off+64),
			small:  fifo{&ctl.smallHead, &ctl.smallTail, shm.U64s(m.mem, small, r)},
			main:   fifo{&ctl.mainHead, &ctl.mainTail, shm.U64s(m.mem, small+8*r, r)},
			ghosts: shm.U32s(m.mem, small+16*r, 2*c),
			epoch:  ghostEpoch(c),
		}
	}
	return areas
}

func (m *Map) evictArea(s *segment) *evictArea { return &m.areas[s.idx] }

// smallLimit and mainLimit share a segment's room of c entries: 10 % for
// the small FIFO, the rest for the main one.
func smallLimit(c int) int { return max(c/10, 1) }
func mainLimit(c int) int  { return max(c-smallLimit(c), 1) }

// itemOf is the FIFO item of the entry whose slot word is w.
func itemOf(w uint64) uint64 { return w &^ (slotPinned | slotDetached | slotFreqMask) }

// recordRead counts a read in segment seg and raises the access count of
// a hit's entry, whose slot word w is at slotOff in mem. Only where the
// map evicts and this process may write.
func (m *Map) recordRead(seg uint32, mem []byte, slotOff int, w uint64, found bool) {
	if !found {
		m.areas[seg].ctr.misses.Add(1)
		return
	}
	m.recordHit(seg, shm.U64(mem, slotOff), w)
}

// recordHit counts a hit and raises the access count of the entry whose
// slot, holding w, is at slot, unless the count is at its top.
func (m *Map) recordHit(seg uint32, slot *atomic.Uint64, w uint64) {
	m.areas[seg].ctr.hits.Add(1)
	if w&slotFreqMask != slotFreqMask {
		slot.CompareAndSwap(w, w+slotFreqOne)
	}
}

// touch raises the access count of the entry at slot pos for a write
// that keeps it, and returns its slot word.
func (m *Map) touch(s *segment, pos uint32, w uint64) uint64 {
	if w&slotFreqMask != slotFreqMask && s.slots[pos].CompareAndSwap(w, w+slotFreqOne) {
		return w + slotFreqOne
	}
	return s.slots[pos].Load()
}

// track puts a new entry's item in its FIFO: the main one if its
// fingerprint is a ghost's, else the small one.
func (m *Map) track(s *segment, item uint64) {
	a := m.evictArea(s)
	if a.ghostHas(uint32(item >> 32)) {
		a.main.push(item)
	} else {
		a.small.push(item)
	}
}

// ghostWord returns fingerprint fp's ghost word and the 16 bits of fp
// it holds.
func (a *evictArea) ghostWord(fp uint32) (*atomic.Uint32, uint32) {
	return &a.ghosts[uint64(fp)%uint64(len(a.ghosts))], fp >> 16
}

// ghostHas reports whether fingerprint fp was evicted from the small FIFO
// in this ghost epoch or the one before.
func (a *evictArea) ghostHas(fp uint32) bool {
	w, tag := a.ghostWord(fp)
	g := w.Load()
	now := uint32(a.ctl.ghostTail.Load() / a.epoch)
	return g>>16 == tag && uint16(now-g) <= 1
}

// ghostPush remembers fingerprint fp as evicted now.
func (a *evictArea) ghostPush(fp uint32) {
	t := a.ctl.ghostTail.Load()
	w, tag := a.ghostWord(fp)
	w.Store(tag<<16 | uint32(uint16(t/a.epoch)))
	a.ctl.ghostTail.Store(t + 1)
}

// noteExpiry lowers s's expiry watermark to x, an expiry time a write
// just gave an entry.
func (m *Map) noteExpiry(s *segment, x int64) {
	ctl := m.evictArea(s).ctl
	if at := ctl.sweepAt.Load(); at == 0 || uint64(x) < at {
		ctl.sweepAt.Store(uint64(x))
	}
}

// resolve finds the entry an item names, if it is still live where the
// item says: the item's bits are those of its slot word, so the slot is
// found by probing from their home, without reading a key.
func (m *Map) resolve(s *segment, item uint64) (pos uint32, w uint64, e entry, ok bool) {
	n := uint32(len(s.slots))
	if n == 0 || item&slotUsed == 0 {
		return 0, 0, entry{}, false
	}
	i := homeIn(item, int(n))
	for range n {
		w = s.slots[i].Load()
		if w == 0 {
			break
		}
		if itemOf(w) == item && w&slotDetached == 0 {
			e, ok = m.entryAt(s, slotChunk(w))
			return i, w, e, ok
		}
		i = next(i, n)
	}
	return 0, 0, entry{}, false
}

// prefetchFIFOs starts bringing in the lines of s's FIFOs that an insert
// that evicts touches: the small FIFO's tail, and the head it evicts from.
func (m *Map) prefetchFIFOs(a *evictArea) {
	h, t := a.ctl.smallHead.Load(), a.ctl.smallTail.Load()
	n := uint64(len(a.small.items))
	shm.PrefetchObject(&a.small.items[t%n])
	shm.PrefetchObject(&a.small.items[h%n])
	if h, t := a.ctl.mainHead.Load(), a.ctl.mainTail.Load(); h != t {
		shm.PrefetchObject(&a.main.items[h%uint64(len(a.main.items))])
	}
}

// prefetchVictim starts bringing in the slot and entry of the item the
// next eviction from s will look at first, while this write goes on.
func (m *Map) prefetchVictim(s *segment, a *evictArea) {
	q, small := a.main, a.small.len() >= smallLimit(m.evictCap) || a.main.len() == 0
	if small {
		q = a.small
	}
	item, ok := q.peek()
	if !ok || len(s.slots) == 0 {
		return
	}
	shm.PrefetchObject(&s.slots[homeIn(item, len(s.slots))])
	if small { // where it goes if it is evicted
		g, _ := a.ghostWord(uint32(item >> 32))
		shm.PrefetchWord(g)
	}
	if off, end, ok := m.chunkAt(s, slotChunk(item)); ok && off < end {
		shm.Prefetch(s.mem, off)
	}
	if k, i := m.extentOf(slotChunk(item)); k >= 0 {
		if bm := m.bitmap(s, k); i>>6 < len(bm) {
			shm.PrefetchObject(&bm[i>>6]) // freed if it goes
		}
	}
}

// makeRoomForInsert evicts from s until it holds fewer than its bound
// of entries, for an insert. It reports an error only when nothing in s
// can be evicted (every entry is pinned by value handles).
func (m *Map) makeRoomForInsert(s *segment) error {
	for int(s.hdr.count.Load()) >= m.evictCap {
		if !m.evictOne(s) {
			return m.nothingToEvict(s)
		}
	}
	return nil
}

func (m *Map) nothingToEvict(s *segment) error {
	return fmt.Errorf("%w: %s: segment %d holds %d entries that value handles pin; none can be evicted",
		ErrFull, m.path, s.idx, s.hdr.count.Load())
}

// evictOne removes one entry of s, an expired one first, and reports
// whether it could. The caller holds the lock with the version even.
func (m *Map) evictOne(s *segment) bool {
	a := m.evictArea(s)
	if m.expiring && m.sweepDue(s, a) {
		n, next := m.sweepSegment(s, s.now)
		a.ctl.sweepAt.Store(uint64(next))
		a.ctl.sweepGate.Store(a.ctr.evictions.Load() + uint64(m.evictCap/16))
		if n > 0 {
			s.evicted = true
			return true
		}
	}
	rebuilt, force := false, false
	budget := 4*(a.small.len()+a.main.len()) + 8
	for try := 0; ; try++ {
		if try == budget {
			switch {
			case !rebuilt:
				// Only entries that must stay went round: those no item
				// names may be elsewhere in the segment.
				m.rebuildFIFOs(s, a)
				rebuilt = true
				budget = try + 4*a.main.len() + 8
			case !force:
				// Readers keep raising every count as fast as this
				// lowers them: the next entry that may go goes.
				force = true
				budget = try + a.small.len() + a.main.len() + 8
			default:
				return false
			}
		}
		fromSmall := a.small.len() >= smallLimit(m.evictCap) || a.main.len() == 0
		q := a.main
		if fromSmall {
			q = a.small
		}
		item, ok := q.pop()
		if !ok {
			if rebuilt || s.hdr.count.Load() == 0 {
				return false
			}
			m.rebuildFIFOs(s, a)
			rebuilt = true
			budget = try + 4*a.main.len() + 8
			continue
		}
		pos, w, e, live := m.resolve(s, item)
		if !live {
			continue
		}
		crash("evict.popped")
		switch {
		case w&slotPinned != 0 || slotChunk(w)+1 == s.protect || slices.Contains(s.protectAll, slotChunk(w)):
			a.main.push(item) // never evicted
		case m.expiring && m.expired(s, e):
			m.deleteLocked(s, pos, w, e)
			m.counters().expiredRemoved.Add(1)
			s.evicted = true
			return true
		case !force && fromSmall && w&slotFreqMask > slotFreqOne:
			// Read more than once while in the small FIFO: to the main one,
			// its count starting again.
			s.slots[pos].Store(w &^ slotFreqMask)
			a.main.push(item)
		case !force && !fromSmall && w&slotFreqMask != 0:
			s.slots[pos].Store(w - slotFreqOne)
			a.main.push(item)
		default:
			if fromSmall {
				a.ghostPush(uint32(item >> 32))
			}
			bytes := uint64(m.chunksFor(e.keyLen, e.valLen)) << m.chunkShift
			m.deleteLocked(s, pos, w, e)
			crash("evict.deleted")
			// The next allocation, very likely of about this size, looks
			// here first rather than scanning a full bitmap up to it.
			s.hdr.allocHint.Store(uint64(slotChunk(w)))
			a.ctr.evictions.Add(1)
			a.ctr.evictedBytes.Add(bytes)
			s.evicted = true
			m.prefetchVictim(s, a)
			return true
		}
	}
}

// sweepDue reports whether an entry of s may have expired by the
// operation's clock reading, and the sweep gate is open.
func (m *Map) sweepDue(s *segment, a *evictArea) bool {
	at := a.ctl.sweepAt.Load()
	return at != 0 && int64(at) <= s.now && a.ctr.evictions.Load() >= a.ctl.sweepGate.Load()
}

// rebuildFIFOs puts every live entry of s in the main FIFO, in slot
// order, for when the FIFOs ran dry while entries remain.
func (m *Map) rebuildFIFOs(s *segment, a *evictArea) {
	a.small.reset()
	a.main.reset()
	for i := range s.slots {
		if w := s.slots[i].Load(); w&slotUsed != 0 && w&slotDetached == 0 {
			a.main.push(itemOf(w))
		}
	}
}

// roomForKeys makes room, for UpdateKeys, for the inserts of keys in
// each of their segments segs, sparing the entries the transaction read.
// It returns ErrFull, with nothing changed but evictions, when a segment
// cannot take them within its bound. The versions are even, no
// transaction begun.
func (m *Map) roomForKeys(segs []segment, keys [][]byte, sc *keysScratch, ops []Op) error {
	for j := range segs {
		s := &segs[j]
		inserts := 0
		for i := range keys {
			if sc.keySeg[i] == j && ops[i] == OpPut && !sc.found[i] {
				inserts++
			}
		}
		if inserts == 0 {
			continue
		}
		m.spareKeys(s, keys, sc)
		for int(s.hdr.count.Load())+inserts > m.evictCap {
			if !m.evictOne(s) {
				break
			}
		}
		s.protectAll = s.protectAll[:0]
		if n := int(s.hdr.count.Load()); n+inserts > m.evictCap {
			return fmt.Errorf("%w: %s: UpdateKeys: segment %d holds %d entries, its bound is %d, and none it could evict makes room for %d more; nothing changed",
				ErrFull, m.path, s.idx, n, m.evictCap, inserts)
		}
	}
	return nil
}

// roomIn evicts one entry from s, the segment where a transaction found
// no room for its values (and aborted), sparing the entries it read, and
// reports whether it could.
func (m *Map) roomIn(s *segment, keys [][]byte, sc *keysScratch) bool {
	m.spareKeys(s, keys, sc)
	defer func() { s.protectAll = s.protectAll[:0] }()
	return m.evictOne(s)
}

// spareKeys sets s.protectAll to the chunks of the keys that UpdateKeys
// found in s.
func (m *Map) spareKeys(s *segment, keys [][]byte, sc *keysScratch) {
	s.protectAll = s.protectAll[:0]
	for i := range keys {
		if sc.found[i] && &sc.segs[sc.keySeg[i]] == s {
			s.protectAll = append(s.protectAll, sc.chunk[i])
		}
	}
}
