package offmap

import (
	"fmt"
	"math/rand/v2"

	"github.com/offmap/offmap/internal/shm"
)

// Multi-key transactions: how UpdateKeys makes its changes all or none,
// even when its process is killed among them.
//
// Each change is written beside what it replaces (copy on write): a new
// or changed value goes to newly allocated chunks, and no slot changes
// until the transaction commits. Then:
//
//  1. prepare: every segment that changes (a participant) gets a
//     transaction record in chunks of its own: the list of its slot
//     changes (insert chunk c, switch chunk a to b, delete chunk a). Its
//     intent word points at the record; its tx word names the transaction
//     and the lowest participant, the commit segment;
//  2. commit: one store sets the committed bit in the commit segment's tx
//     word. That store is the transaction's instant;
//  3. apply: each participant's slot changes are made, its record
//     dropped and its words cleared; the commit segment's last, so that
//     its committed word outlives every other participant's record.
//
// The locks of every participant are held from before 1 to after 3 and
// their versions stay odd, so no one sees a part of it. A process killed
// anywhere leaves the locks held by a dead process; whoever takes one over
// repairs that segment (repairLocked): if the commit segment's word says
// committed, it finishes the segment's part from its record (each change
// is checked against the slots first, so doing it twice is harmless);
// otherwise it drops the segment's part (the new chunks belong to no slot
// and are freed). A repair of the commit segment first drives every other
// participant to its end (it locks them, which repairs them), and only
// then clears its committed word. A participant reads the commit
// segment's word without its lock: that word changes only under the
// dead holder's locks, or under the commit segment's repair, which clears
// it only after the participant's repair.
//
// Format (segment header, format.go):
//
//	tx word (offset 72): 0, or bits 0-15 the commit segment, bits 16-62
//	         a random transaction id (never 0), bit 63 committed (set
//	         only in the commit segment's word)
//	intent (offset 56) with bit 63 set: 1 + the chunk of the segment's
//	         transaction record
//
// Transaction record, in the segment's chunks:
//
//	0   8  the tx word, without the committed bit
//	8   8  n, the number of changes
//	16     n changes of 16 bytes: uint32 kind (1 insert, 2 switch,
//	       3 delete), uint32 chunk a, uint32 chunk b, uint32 zero
//
// An insert's chunk is b; a switch moves the slot of chunk a to chunk b; a
// delete empties the slot of chunk a.

const (
	txSegBits   = 16
	txSegMask   = 1<<txSegBits - 1
	txCommitted = 1 << 63
	// intentTx marks an intent word that points at a transaction record
	// rather than at an entry rewritten through the redo record.
	intentTx       = 1 << 63
	txRecordHeader = 16
	txChangeSize   = 16
)

// Kinds of slot change in a transaction record.
const (
	txInsert = 1
	txSwitch = 2
	txDelete = 3
)

type txChange struct {
	kind uint32
	a, b uint32
}

// txPart is one participant's share of a transaction.
type txPart struct {
	seg     *segment
	changes []txChange
	record  uint32 // chunk of its record, once written
	written bool
}

func newTxWord(commitSeg int) uint64 {
	id := rand.Uint64() >> (txSegBits + 1)
	if id == 0 {
		id = 1
	}
	return id<<txSegBits | uint64(commitSeg)
}

// transact makes the changes of UpdateKeys, with every segment of sc.segs
// locked and its version odd; sc.found[i] and sc.chunk[i] say where
// keys[i] is now. The participants are the segments with a change, in
// segment order.
func (m *Map) transact(keys [][]byte, sc *keysScratch, news [][]byte, ops []Op) error {
	sc.full = nil
	hashes, found, chunk := sc.hashes, sc.found, sc.chunk
	// partOf[i]: the share of keys[i]'s segment (sc.parts is per segment).
	partOf := func(i int) *txPart { return &sc.parts[sc.keySeg[i]] }
	for i := range keys {
		if ops[i] == OpNone || ops[i] == OpDelete && !found[i] {
			continue
		}
		if p := partOf(i); p.seg == nil {
			p.seg = &sc.segs[sc.keySeg[i]]
		}
	}
	parts := sc.partList[:0]
	for i := range sc.parts {
		if p := &sc.parts[i]; p.seg != nil {
			parts = append(parts, p)
		}
	}
	sc.partList = parts
	if len(parts) == 0 {
		return nil
	}

	// Room in the slot tables for the inserts (deletes free theirs only
	// when the transaction has committed).
	for _, p := range parts {
		inserts := 0
		for i := range keys {
			if int(hashes[i].seg) == p.seg.idx && ops[i] == OpPut && !found[i] {
				inserts++
			}
		}
		for int(p.seg.hdr.count.Load()+p.seg.hdr.detached.Load())+inserts > tableLimit(len(p.seg.slots)) {
			if err := m.growSlots(p.seg); err != nil {
				return err
			}
		}
	}

	// New values beside the old ones.
	for i, k := range keys {
		p := partOf(i)
		switch {
		case ops[i] == OpDelete && found[i]:
			p.changes = append(p.changes, txChange{kind: txDelete, a: chunk[i]})
		case ops[i] == OpPut:
			c, err := m.allocOrGrow(p.seg, m.chunksFor(len(k), len(news[i])))
			if err != nil {
				sc.full = p.seg
				m.abortTx(parts)
				return fmt.Errorf("offmap: UpdateKeys: key %q: %w; nothing changed", k, err)
			}
			m.writeEntry(p.seg, c, k, news[i])
			if found[i] {
				p.changes = append(p.changes, txChange{kind: txSwitch, a: chunk[i], b: c})
			} else {
				p.changes = append(p.changes, txChange{kind: txInsert, b: c})
			}
		}
	}
	crash("tx.entries")

	word := newTxWord(parts[0].seg.idx)
	for _, p := range parts {
		c, err := m.allocOrGrow(p.seg, m.txRecordChunks(len(p.changes)))
		if err != nil {
			sc.full = p.seg
			m.abortTx(parts)
			return fmt.Errorf("offmap: UpdateKeys: %w; nothing changed", err)
		}
		p.record, p.written = c, true
		off, _, _ := m.chunkAt(p.seg, c)
		shm.U64(p.seg.mem, off).Store(word)
		shm.U64(p.seg.mem, off+8).Store(uint64(len(p.changes)))
		for j, ch := range p.changes {
			o := off + txRecordHeader + j*txChangeSize
			shm.U64(p.seg.mem, o).Store(uint64(ch.kind) | uint64(ch.a)<<32)
			shm.U64(p.seg.mem, o+8).Store(uint64(ch.b))
		}
		p.seg.hdr.intent.Store(intentTx | uint64(c) + 1)
		p.seg.hdr.tx.Store(word)
		crash("tx.prepared")
	}

	parts[0].seg.hdr.tx.Store(word | txCommitted)
	crash("tx.committed")

	for j := range parts {
		p := parts[(j+1)%len(parts)] // the commit segment's last
		for _, ch := range p.changes {
			m.applyTxChange(p.seg, ch)
			crash("tx.change")
		}
		// The record's chunks keep their bytes until the next allocation,
		// which no one makes before this part is over or repaired.
		m.freeLocked(p.seg, p.record, m.txRecordChunks(len(p.changes)))
		p.seg.hdr.intent.Store(0)
		p.seg.hdr.tx.Store(0)
		crash("tx.part")
	}
	return nil
}

func (m *Map) txRecordChunks(changes int) int {
	return (txRecordHeader + txChangeSize*changes + int(m.hdr.ChunkSize) - 1) >> m.chunkShift
}

// abortTx undoes a transaction that has not committed: it frees the
// chunks of its new values and records and clears the words it set.
func (m *Map) abortTx(parts []*txPart) {
	for _, p := range parts {
		for _, ch := range p.changes {
			if ch.kind != txDelete {
				if e, ok := m.entryAt(p.seg, ch.b); ok {
					m.freeLocked(p.seg, ch.b, m.chunksFor(e.keyLen, e.valLen))
				}
			}
		}
		if p.written {
			m.freeLocked(p.seg, p.record, m.txRecordChunks(len(p.changes)))
		}
		p.seg.hdr.intent.Store(0)
		p.seg.hdr.tx.Store(0)
	}
}

// applyTxChange makes one slot change of a committed transaction, with
// the bookkeeping a write does (counts, free chunks).
func (m *Map) applyTxChange(s *segment, ch txChange) {
	switch ch.kind {
	case txInsert:
		e, _ := m.entryAt(s, ch.b)
		key := s.mem[e.keyOff() : e.keyOff()+e.keyLen]
		h := m.hash(key)
		pos, _, _, _, _ := m.find(s, key, h)
		s.slots[pos].Store(h.match | uint64(ch.b))
		s.hdr.count.Add(1)
		s.hdr.usedChunks.Add(uint64(m.chunksFor(e.keyLen, e.valLen)))
		if m.evict {
			m.track(s, h.match|uint64(ch.b))
		}
	case txSwitch:
		ne, _ := m.entryAt(s, ch.b)
		key := s.mem[ne.keyOff() : ne.keyOff()+ne.keyLen]
		pos, w, e, _, _ := m.find(s, key, m.hash(key))
		s.slots[pos].Store(w&^slotChunkMask | uint64(ch.b))
		oldN, newN := m.chunksFor(e.keyLen, e.valLen), m.chunksFor(ne.keyLen, ne.valLen)
		m.freeLocked(s, ch.a, oldN)
		s.hdr.usedChunks.Add(uint64(newN - oldN))
		if m.evict {
			m.evictArea(s).main.push(itemOf(w)&^slotChunkMask | uint64(ch.b))
		}
	case txDelete:
		e, _ := m.entryAt(s, ch.a)
		key := s.mem[e.keyOff() : e.keyOff()+e.keyLen]
		pos, w, _, _, _ := m.find(s, key, m.hash(key))
		m.deleteLocked(s, pos, w, e)
	}
}

// resolveTx finishes or drops segment s's part of an interrupted
// transaction, on its slots t (the shared ones, or a checker's copy when
// fix is false), and reports what it did. It runs first thing in a
// repair, before the slots are checked, and leaves the bitmap to the
// rebuild that follows: new chunks no slot took are freed there.
func (m *Map) resolveTx(s *segment, t slotTable, fix bool, report func(string, ...any)) {
	word, in := s.hdr.tx.Load(), s.hdr.intent.Load()
	if word == 0 {
		if in&intentTx != 0 {
			report("an UpdateKeys was interrupted before this segment joined it; its new values are dropped")
			if fix {
				s.hdr.intent.Store(0)
			}
		}
		return
	}
	commitSeg := int(word & txSegMask)
	id := word &^ txCommitted
	if commitSeg == s.idx && in == 0 {
		return // its own part is resolved; finishTx waits for the others
	}
	committed := false
	if commitSeg < int(m.hdr.Segments) {
		committed = m.segment(uint32(commitSeg)).hdr.tx.Load() == id|txCommitted
	}
	changes, ok := m.txRecord(s, id, in)
	switch {
	case !committed:
		report("an UpdateKeys was interrupted before it committed; its changes here are dropped")
	case !ok:
		report("an UpdateKeys committed, but this segment's record of it is damaged; its changes here are lost")
	default:
		report("an UpdateKeys was interrupted after it committed; its %d changes here are completed", len(changes))
		for _, ch := range changes {
			m.replayTxChange(s, t, ch)
		}
	}
	if fix {
		s.hdr.intent.Store(0)
		if commitSeg != s.idx {
			s.hdr.tx.Store(0)
		} // the commit segment's word is cleared by finishTx
	}
}

// txRecord reads s's transaction record, named by its intent word in,
// checking every bound; ok is false if it is not one of transaction id.
func (m *Map) txRecord(s *segment, id, in uint64) (changes []txChange, ok bool) {
	if in&intentTx == 0 || in&^intentTx == 0 || in&^intentTx-1 > slotChunkMask {
		return nil, false
	}
	off, end, ok := m.chunkAt(s, uint32(in&^intentTx-1))
	if !ok || off > end-txRecordHeader || shm.U64(s.mem, off).Load() != id {
		return nil, false
	}
	n := shm.U64(s.mem, off+8).Load()
	if n > uint64(end-off-txRecordHeader)/txChangeSize {
		return nil, false
	}
	for j := range int(n) {
		o := off + txRecordHeader + j*txChangeSize
		w := shm.U64(s.mem, o).Load()
		ch := txChange{kind: uint32(w), a: uint32(w >> 32), b: uint32(shm.U64(s.mem, o+8).Load())}
		if ch.kind < txInsert || ch.kind > txDelete {
			return nil, false
		}
		changes = append(changes, ch)
	}
	return changes, true
}

// replayTxChange makes one change of a committed transaction on slots t
// during a repair, if it is not made yet. It finds slots by chunk, not by
// key: a delete interrupted in its backward shift may have cut entries
// off from their home, which the repair's later steps mend (as they mend
// the hole a replayed delete leaves). Counts and bitmap are rebuilt after.
func (m *Map) replayTxChange(s *segment, t slotTable, ch txChange) {
	n := t.Len()
	slotOf := func(c uint32) (uint32, bool) {
		for i := range n {
			if w := t.Load(i); w != 0 && slotChunk(w) == c {
				return i, true
			}
		}
		return 0, false
	}
	switch ch.kind {
	case txInsert:
		if _, done := slotOf(ch.b); done {
			return
		}
		e, ok := m.entryAt(s, ch.b)
		if !ok {
			return
		}
		h := m.hash(s.mem[e.keyOff() : e.keyOff()+e.keyLen])
		if int(h.seg) != s.idx {
			return
		}
		i := homeIn(h.match, int(n))
		for range n {
			if t.Load(i) == 0 {
				t.Store(i, h.match|uint64(ch.b))
				return
			}
			i = next(i, n)
		}
	case txSwitch:
		if _, ok := m.entryAt(s, ch.b); !ok {
			return
		}
		if i, ok := slotOf(ch.a); ok {
			t.Store(i, t.Load(i)&^slotChunkMask|uint64(ch.b))
		}
	case txDelete:
		if i, ok := slotOf(ch.a); ok {
			t.Store(i, 0)
		}
	}
}

// finishTx ends the transaction whose commit segment s is, once s's own
// part is resolved: it locks every other segment still in it (taking the
// lock over repairs that segment), then clears s's word. The other
// segments are after s in lock order, so this waits for no one who waits
// for s. It reports a segment it could not lock; s's word then stays, and
// the next lock of s tries again.
func (m *Map) finishTx(s *segment, report func(string, ...any)) {
	word := s.hdr.tx.Load()
	if word == 0 || int(word&txSegMask) != s.idx {
		return
	}
	id := word &^ txCommitted
	for j := s.idx + 1; j < int(m.hdr.Segments); j++ {
		o := m.segment(uint32(j))
		if o.hdr.tx.Load()&^txCommitted != id {
			continue
		}
		if err := m.lock(&o); err != nil {
			report("segment %d, also in the interrupted UpdateKeys, could not be repaired: %v", j, err)
			return
		}
		o.hdr.lock.Unlock()
	}
	s.hdr.tx.Store(0)
}

// committedChanges returns the slot changes of s's part of a committed
// transaction that a dead writer left inside UpdateKeys, from its record
// in s, for a reader that cannot repair s (a read-only process). A
// transaction switches slots only after its commit, so one that did not
// commit has none to read through; one that did may have switched some
// slots and not others, and the record says what each key becomes. Every
// word read from the file is checked: a record that does not hold
// together gives none.
func (m *Map) committedChanges(s *segment) []txChange {
	word, in := s.hdr.tx.Load(), s.hdr.intent.Load()
	if word == 0 || in&intentTx == 0 {
		return nil // no transaction, or this segment's part is done
	}
	commitSeg := word & txSegMask
	if commitSeg >= uint64(m.hdr.Segments) {
		return nil
	}
	id := word &^ txCommitted
	if m.segment(uint32(commitSeg)).hdr.tx.Load() != id|txCommitted {
		return nil
	}
	off, end, ok := m.chunkAt(s, uint32(in&^intentTx)-1)
	if !ok || off > end-txRecordHeader || shm.U64(s.mem, off).Load() != id {
		return nil
	}
	n := shm.U64(s.mem, off+8).Load()
	if n > uint64((end-off-txRecordHeader)/txChangeSize) {
		return nil
	}
	changes := make([]txChange, n)
	for j := range changes {
		o := off + txRecordHeader + j*txChangeSize
		x := shm.U64(s.mem, o).Load()
		changes[j] = txChange{kind: uint32(x), a: uint32(x >> 32), b: uint32(shm.U64(s.mem, o+8).Load())}
	}
	return changes
}

// asCommitted is a lookup's result (found, the slot word w and entry e of
// key) as the committed transaction of committedChanges makes it.
func (m *Map) asCommitted(s *segment, key []byte, w uint64, e entry, found bool) (entry, bool) {
	return m.through(s, m.committedChanges(s), key, w, e, found)
}

// through is asCommitted with the changes read.
func (m *Map) through(s *segment, changes []txChange, key []byte, w uint64, e entry, found bool) (entry, bool) {
	for _, ch := range changes {
		switch {
		case ch.kind == txDelete && found && slotChunk(w) == ch.a:
			return entry{}, false
		case ch.kind == txSwitch && found && slotChunk(w) == ch.a,
			ch.kind == txInsert && !found:
			if ne, ok := m.entryAt(s, ch.b); ok && ne.keyLen == len(key) &&
				shm.Equal(s.mem[ne.keyOff():ne.keyOff()+ne.keyLen], key) {
				return ne, true
			}
		}
	}
	return e, found
}
