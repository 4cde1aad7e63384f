package offmap

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Readers take no lock. They read a segment's version, do their lookup and
// copy, and read the version again: if it is odd or has changed, a writer
// was at work and they retry. Every offset read on the way is bounds-checked,
// so a torn read can at worst fail a check and retry.

// readTries is how many optimistic attempts a reader makes before it
// waits for the writer instead of spinning.
const readTries = 64

// staleAfter is how long a read-only reader waits for a writer before it
// checks whether the writer died (a variable for the fuzz tests).
var staleAfter = 100 * time.Millisecond

// staleWaits counts the waits of staleAfter that read-only readers began,
// for the tests: a dead writer should cost one, not one per read.
var staleWaits atomic.Int64

// knownDead reports whether a read-only reader of this map found the
// holder t dead before. A token is never reused, so the verdict holds for
// every segment whose lock word names it.
func (m *Map) knownDead(t shm.Token) bool {
	for i := range m.deadWriters {
		if m.deadWriters[i].Load() == uint64(t) {
			return true
		}
	}
	return false
}

func (m *Map) rememberDead(t shm.Token) {
	m.deadWriters[m.deadNext.Add(1)%uint32(len(m.deadWriters))].Store(uint64(t))
}

// readStep waits before a retry of an optimistic read. After the first
// attempts it takes the segment lock and releases it: that waits for the
// writer and, if the writer is dead, repairs the segment. A read-only
// process cannot lock; it reports quiescent=true once the writer is known
// to be dead, and reads the segment as the writer left it (through the
// record of an interrupted UpdateKeys). It remembers the dead writer until
// the segment's lock word changes, so that later reads of the segment
// neither wait nor ask again.
//
// v is the odd version the reader saw. The verdict is for the lock word's
// holder then (0 for a free lock over an odd version, which only damage
// leaves): a writer that takes the lock over to repair the segment ends
// it, and so does a live writer's finishing, which a free lock seen just
// after it must not be taken for.
func (m *Map) readStep(s *segment, v uint64, try int, since *time.Time) (quiet, error) {
	if try < readTries {
		if try > readTries/2 {
			shm.Yield()
		}
		return quiet{}, nil
	}
	if !m.readOnly {
		if err := m.lock(s); err != nil {
			return quiet{}, err
		}
		s.hdr.lock.Unlock()
		return quiet{}, nil
	}
	if readStepLooks != nil {
		readStepLooks(0)
	}
	owner := s.hdr.lock.Owner()
	if readStepLooks != nil {
		readStepLooks(1)
	}
	if owner == 0 {
		return quiet{on: v&1 != 0 && s.hdr.version.Load() == v}, nil
	}
	if m.knownDead(owner) {
		return quiet{true, owner}, nil
	}
	if since.IsZero() {
		*since = time.Now()
		staleWaits.Add(1)
	}
	if time.Since(*since) < staleAfter {
		time.Sleep(time.Millisecond)
		return quiet{}, nil
	}
	if !m.witness.Alive(owner) {
		m.rememberDead(owner)
		return quiet{true, owner}, nil
	}
	*since = time.Now()
	return quiet{}, nil
}

// quiet is a read-only reader's verdict on a segment with an odd version
// (readStep): on when no live writer will finish the change, so that the
// reader reads the segment as it was left, through the record of an
// interrupted UpdateKeys. Such a read still checks, after it, that the
// version did not change, and that holder still holds the lock: a writer
// that takes it over repairs the segment under the same odd version.
type quiet struct {
	on     bool
	holder shm.Token
}

// holds reports whether the verdict still stands for s.
func (q quiet) holds(s *segment) bool { return q.on && s.hdr.lock.Owner() == q.holder }

// ended is q, or no verdict once it no longer holds.
func (q quiet) ended(s *segment) quiet {
	if !q.holds(s) {
		return quiet{}
	}
	return q
}

// readDone reports whether a read of s that began at version v holds: the
// version unchanged and, for a quiescent read, the holder too.
func readDone(s *segment, v uint64, q quiet) bool {
	return s.hdr.version.Load() == v && (!q.on || q.holds(s))
}

// readStepLooks, when set by a test, runs in a read-only readStep before
// (0) and after (1) its look at the lock's holder.
var readStepLooks func(phase int)

func putWord(b []byte, w uint64) { binary.LittleEndian.PutUint64(b, w) }

// readValue runs an optimistic lookup of key and appends its value to dst.
func (m *Map) readValue(dst, key []byte, wantValue bool) ([]byte, bool, error) {
	if m.closed.Load() {
		return dst, false, ErrClosed
	}
	if len(key) > int(m.hdr.MaxKey) {
		return dst, false, nil
	}
	return m.readHashed(dst, key, m.hash(key), wantValue)
}

// readHashed is readValue for a key of hash h, no longer than MaxKey.
func (m *Map) readHashed(dst, key []byte, h keyHash, wantValue bool) ([]byte, bool, error) {
	// The common case in as few instructions as possible, so that the CPU
	// overlaps the cache misses of consecutive lookups: no writer at work,
	// and the key found or cleanly absent.
	sh := shm.Overlay[segmentHeader](m.mem, int(m.hdr.SegHeadersOff)+int(h.seg)*segmentHeaderSize)
	if v := sh.version.Load(); v&1 == 0 {
		mem := m.current()
		base := m.segBase(h.seg)
		slots, n := m.tableOf(base, sh.table.Load())
		if m.tableFits(slots, n, len(mem), base) {
			off, vn, w, so, bad := m.probe(mem, sh, base, slots, n, key, h)
			found := w != 0
			if found && m.expiring {
				// The expiry word follows the value (and the checksum).
				x := off + shm.Pad8(vn)
				if m.sums {
					x += 8
				}
				found = !expiredNow(mem, x)
			}
			if !bad {
				out, rejected := dst, false
				if found && wantValue {
					out = appendValueAt(dst, mem, off, vn)
					// A checksum that fails under a stable version is
					// damage: the slow path says so.
					rejected = m.sums && m.sumRejects(mem, w, off+shm.Pad8(vn), key, out[len(dst):])
				}
				if !rejected && sh.version.Load() == v && !m.closed.Load() {
					if m.evict && !m.readOnly {
						m.recordRead(h.seg, mem, so, w, found)
					}
					return out, found, nil
				}
			}
		}
	}
	sv := m.segment(h.seg)
	return m.readSlow(dst, key, h, &sv, wantValue)
}

// probe looks key up for a reader in the table of n slots at slots (an
// offset in mem) of the segment with header sh and initial body at base:
// the offset and length of its value, and its slot word and the slot's
// offset, if found (w = 0 if not). bad reports bytes out of bounds.
func (m *Map) probe(mem []byte, sh *segmentHeader, base, slots, n int, key []byte, h keyHash) (valOff, valLen int, w uint64, slotOff int, bad bool) {
	area0 := base + int(m.hdr.AreaOff)
	i := homeIn(h.match, n)
	for range n {
		w = shm.U64(mem, slots+int(i)*8).Load()
		if w&m.matchBits == h.match {
			c := slotChunk(w)
			off, end, ok := area0+int(c)<<m.chunkShift, area0+m.area0Len, true
			if uint64(c) >= m.hdr.ChunksPerSegment { // in a grown extent
				off, end, ok = m.locate(mem, sh, base, c)
			}
			if !ok || off > end-entryHeaderSize {
				return 0, 0, 0, 0, true
			}
			hw := shm.U64(mem, off).Load() // key length | value length << 32
			kl, vl := int(uint32(hw)), int(hw>>32)
			if kl > int(m.hdr.MaxKey) || vl > int(m.hdr.MaxValue) || off+entryBytes(kl, vl, m.trailer) > end {
				return 0, 0, 0, 0, true
			}
			if kl == len(key) && shm.Equal(mem[off+entryHeaderSize:], key) {
				return off + entryHeaderSize + shm.Pad8(kl), vl, w, slots + int(i)*8, false
			}
		} else if w == 0 {
			return 0, 0, 0, 0, false
		}
		if i++; int(i) == n {
			i = 0
		}
	}
	return 0, 0, 0, 0, true
}

// appendValueAt appends the n-byte value at mem[off:] to dst; values of up
// to 8 bytes are read with one atomic load.
func appendValueAt(dst, mem []byte, off, n int) []byte {
	l := len(dst)
	if cap(dst)-l < n {
		dst = append(dst[:l:l], make([]byte, n)...)
	} else {
		dst = dst[:l+n]
	}
	switch {
	case n == 8:
		putWord(dst[l:], shm.U64(mem, off).Load())
	case n > 8:
		shm.Load(dst[l:], mem[off:])
	case n > 0:
		w := shm.U64(mem, off).Load()
		for i := range n {
			dst[l+i] = byte(w >> (8 * i))
		}
	}
	return dst
}

// readSlow is readValue's loop for when a writer is at work, has died,
// or the segment is damaged.
func (m *Map) readSlow(dst, key []byte, h keyHash, s *segment, wantValue bool) ([]byte, bool, error) {
	base := len(dst)
	var since time.Time
	var q quiet
	for try := 0; ; try++ {
		v := s.hdr.version.Load()
		if q = q.ended(s); v&1 != 0 && !q.on {
			var err error
			if q, err = m.readStep(s, v, try, &since); err != nil {
				return dst[:base], false, err
			}
			continue
		}
		quiescent := q.on
		m.loadTable(s)
		pos, w, e, found, bad := m.find(s, key, h)
		if quiescent {
			e, found = m.asCommitted(s, key, w, e, found)
		}
		if found && m.expired(s, e) {
			found = false
		}
		out, rejected := dst[:base], false
		if found && wantValue {
			if quiescent && s.hdr.intent.Load() == uint64(slotChunk(w))+1 {
				out = m.scratchValue(out, s, e) // its checksum is written when the redo is applied
			} else {
				out = loadValue(out, s, e)
				rejected = m.sumRejects(s.mem, w, e.sumOff(), key, out[base:])
			}
		}
		if readDone(s, v, q) {
			if m.closed.Load() {
				return dst[:base], false, ErrClosed
			}
			if rejected {
				return dst[:base], false, m.corrupt(s, fmt.Sprintf("the entry of key %q fails its checksum (torn by a power cut, or damaged)", key))
			}
			if bad && !found {
				if m.mapsPast(len(s.mem)) {
					continue // another process grew the file: map it and look again
				}
				return dst[:base], false, m.corrupt(s, "a lookup met an entry outside the segment")
			}
			if m.evict && !m.readOnly {
				if found {
					m.recordHit(h.seg, &s.slots[pos], w)
				} else {
					m.areas[h.seg].ctr.misses.Add(1)
				}
			}
			return out, found, nil
		}
		var err error
		if q, err = m.readStep(s, v, try, &since); err != nil {
			return dst[:base], false, err
		}
	}
}

// scratchValue appends the value a dead writer was copying into e from the
// redo record: what the entry holds once the redo is applied.
func (m *Map) scratchValue(dst []byte, s *segment, e entry) []byte {
	n := m.scratchLen(s)
	if n < 0 || m.chunksFor(e.keyLen, n) > m.chunksFor(e.keyLen, e.valLen) {
		return loadValue(dst, s, e)
	}
	base := len(dst)
	dst = append(dst, make([]byte, n)...)
	shm.Load(dst[base:], m.scratch(s)[8:])
	return dst
}
