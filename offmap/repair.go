package offmap

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/offmap/offmap/internal/shm"
)

// A segment's truth is its slots: each is written with one atomic store,
// so a process that dies at any instant leaves every slot either old or
// new. Everything else is derived from them (counts, the chunk bitmap) or
// is a redo record. Repair therefore:
//
//  1. replays an interrupted in-place value update from the redo record;
//  2. drops slots whose entry is invalid (outside the segment, or whose
//     key does not hash to the slot): only damage, never a crash, does this;
//  3. removes the second reference to an entry (a crash in the middle of a
//     backward-shift delete leaves one);
//  4. drops entries that overlap an earlier one (damage);
//  5. moves entries that a hole cut off from their home back into reach;
//  6. rebuilds counts and the bitmap, freeing chunks of half-done inserts.
//
// Each step is itself a sequence of single-slot atomic stores that writes
// an entry's new place before clearing its old one, so a repair killed
// half way is finished by the next one. Check runs the same steps on a
// private copy and reports instead of fixing.

// scanSegment checks segment s, whose slots are t (the shared slots when
// fix is true, a private copy otherwise), and returns what it found.
func (m *Map) scanSegment(s *segment, t slotTable, fix bool) []string {
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// What a repair does to a slot: done when fixing, to be done when checking.
	dropped, movedTo := "entry dropped", "moved to slot"
	if !fix {
		dropped, movedTo = "recover drops the entry", "recover moves it to slot"
	}
	n := t.Len()

	// Extents are added in order; one after a missing or misplaced one is
	// damage, and so are its entries. One past what this process has
	// mapped may be another process's growth: map it and look again.
	var bms [maxExtents + 1][]uint64
	extents := m.extentBitmaps(s, &bms)
	if extents <= m.maxExtent() && s.hdr.extents[extents-1].Load() != 0 && m.mapsPast(len(s.mem)) {
		s.mem = m.current()
		extents = m.extentBitmaps(s, &bms)
	}
	for k := extents; k <= m.maxExtent(); k++ {
		if k > 0 && s.hdr.extents[k-1].Load() != 0 {
			report("extent %d: its place in the file, %d, is not valid or follows a missing extent; %s",
				k, s.hdr.extents[k-1].Load(), strings.Replace(dropped, "entry", "extent", 1))
			if fix {
				s.hdr.extents[k-1].Store(0)
			}
		}
	}

	if in := s.hdr.intent.Load(); in != 0 && in&intentTx == 0 {
		report("an in-place value update was interrupted (redo record for chunk %d)", in-1)
		if fix {
			m.replayRedo(s, t, uint32(in-1))
			s.hdr.intent.Store(0)
		}
	}

	for i := range n {
		w := t.Load(i)
		if w == 0 {
			continue
		}
		if why := m.invalidSlot(s, s.idx, w); why != "" {
			report("slot %d: %s; %s", i, why, dropped)
			t.Store(i, 0)
		}
	}

	owner := make(map[uint32]uint32)
	for i := range n {
		w := t.Load(i)
		if w == 0 {
			continue
		}
		c := slotChunk(w)
		j, dup := owner[c]
		if !dup {
			owner[c] = i
			continue
		}
		// Keep the copy nearer its home: a backward shift moves entries
		// toward their home, so that one is the newer.
		drop, keep := i, j
		if dist(homeIn(w, int(n)), i, n) < dist(homeIn(w, int(n)), j, n) {
			drop, keep = j, i
		}
		report("slots %d and %d both reference chunk %d (a delete was interrupted)", keep, drop, c)
		t.Store(drop, 0)
		owner[c] = keep
	}

	// A multi-key update interrupted after it committed is finished here,
	// once duplicates are gone; one interrupted before, dropped.
	m.resolveTx(s, t, fix, report)

	// Entries a power cut tore: the checksum of key and value disagrees.
	// (Entries that handles pin have none that holds.)
	if m.trailer != 0 {
		for i := range n {
			w := t.Load(i)
			if w == 0 || w&slotPinned != 0 {
				continue
			}
			if e, ok := m.entryAt(s, slotChunk(w)); ok && !m.sumHolds(s, e) {
				report("slot %d: entry at chunk %d fails its checksum (torn by a power cut?); %s", i, slotChunk(w), dropped)
				t.Store(i, 0)
			}
		}
	}

	used := make([][]uint64, extents)
	for k := range used {
		used[k] = make([]uint64, len(bms[k]))
	}
	for i := range n {
		w := t.Load(i)
		if w == 0 {
			continue
		}
		e, _ := m.entryAt(s, slotChunk(w))
		k, c := m.extentOf(slotChunk(w))
		size := m.chunksFor(e.keyLen, e.valLen)
		if k < 0 || k >= extents {
			report("slot %d: entry at chunk %d lies in no extent; %s", i, slotChunk(w), dropped)
			t.Store(i, 0)
			continue
		}
		if !runIsClear(used[k], c, size) {
			report("slot %d: entry at chunk %d overlaps another entry; %s", i, slotChunk(w), dropped)
			t.Store(i, 0)
			continue
		}
		setRun(used[k], c, size)
	}

	for moved := true; moved; {
		moved = false
		for i := range n {
			w := t.Load(i)
			if w == 0 {
				continue
			}
			for j := homeIn(w, int(n)); j != i; j = next(j, n) {
				if t.Load(j) == 0 {
					report("slot %d: entry cut off from its home slot %d; %s %d", i, homeIn(w, int(n)), movedTo, j)
					t.Store(j, w)
					t.Store(i, 0)
					moved = true
					break
				}
			}
		}
	}

	var count, detached, chunks uint64
	for i := range n {
		w := t.Load(i)
		if w == 0 {
			continue
		}
		if w&slotDetached != 0 {
			detached++
		} else {
			count++
		}
	}
	for _, bm := range used {
		for _, x := range bm {
			chunks += uint64(popcount(x))
		}
	}
	if got := s.hdr.count.Load(); got != count {
		report("entry count says %d, slots hold %d", got, count)
	}
	if got := s.hdr.detached.Load(); got != detached {
		report("detached count says %d, slots hold %d", got, detached)
	}
	if got := s.hdr.usedChunks.Load(); got != chunks {
		report("used chunk count says %d, entries take %d", got, chunks)
	}
	leaked, unmarked := 0, 0
	for k := range used {
		for j := range used[k] {
			leaked += popcount(bms[k][j] &^ used[k][j])
			unmarked += popcount(used[k][j] &^ bms[k][j])
		}
	}
	if leaked > 0 {
		report("%d chunks marked used belong to no entry (an insert was interrupted)", leaked)
	}
	if unmarked > 0 {
		report("%d chunks of live entries are marked free", unmarked)
	}
	if fix {
		for k := range used {
			copy(bms[k], used[k])
		}
		s.hdr.count.Store(count)
		s.hdr.detached.Store(detached)
		s.hdr.usedChunks.Store(chunks)
		s.hdr.allocHint.Store(0)
	}
	for i := range problems {
		problems[i] = fmt.Sprintf("segment %d: %s", s.idx, problems[i])
	}
	return problems
}

// invalidSlot returns why slot word w cannot be a valid entry of segment
// idx, or "".
func (m *Map) invalidSlot(s *segment, idx int, w uint64) string {
	if w&slotUsed == 0 {
		return fmt.Sprintf("bad slot word %#x", w)
	}
	e, ok := m.entryAt(s, slotChunk(w))
	if !ok {
		return fmt.Sprintf("entry at chunk %d is outside the segment or over the size limits", slotChunk(w))
	}
	key := make([]byte, e.keyLen)
	shm.Load(key, s.mem[e.keyOff():])
	h := m.hash(key)
	if int(h.seg) != idx || w&(m.matchBits&^slotDetached) != h.match {
		return fmt.Sprintf("key at chunk %d does not hash to this slot", slotChunk(w))
	}
	return ""
}

// replayRedo finishes an interrupted in-place update of the entry at
// chunk c, if a slot references it and the record is sane.
func (m *Map) replayRedo(s *segment, t slotTable, c uint32) {
	e, ok := m.entryAt(s, c)
	if !ok {
		return
	}
	referenced := false
	for i := range t.Len() {
		if w := t.Load(i); w != 0 && slotChunk(w) == c {
			referenced = true
		}
	}
	n := m.scratchLen(s)
	// The header holds the old length or, if the copy had begun, the new
	// one: either way the new value fits the entry's chunks.
	if !referenced || n < 0 || m.chunksFor(e.keyLen, n) > m.chunksFor(e.keyLen, e.valLen) {
		return
	}
	m.applyRedo(s, e, n)
}

// repairLocked repairs segment s after its lock was taken over from a dead
// holder. The version stays odd while it works, so readers wait.
func (m *Map) repairLocked(s *segment) []string {
	var problems []string
	if s.hdr.version.Load()&1 == 0 {
		beginChange(s)
	} else {
		problems = append(problems, fmt.Sprintf("segment %d: a write was interrupted (version odd)", s.idx))
	}
	if !m.loadTable(s) {
		problems = append(problems, fmt.Sprintf("segment %d: its slot table word %#x names no valid table; the segment goes back to its first table",
			s.idx, s.hdr.table.Load()))
		s.hdr.table.Store(0)
		m.loadTable(s)
	}
	problems = append(problems, m.scanSegment(s, sharedSlots(s.slots), true)...)
	m.finishTx(s, func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("segment %d: ", s.idx)+fmt.Sprintf(format, args...))
	})
	s.hdr.lock.ResetSleepers()
	endChange(s)
	return problems
}

// recoverAlone runs when this process opened the map while no other
// process had it open: every held lock belongs to a dead process, and no
// value handle anywhere points into detached entries, so their space can
// be reclaimed.
func (m *Map) recoverAlone() {
	// The growth descriptors first: a segment's repair writes into its
	// tables and extents, which must be its own.
	m.openRepairs, _ = m.checkGrowth(m.fileEnd(), true)
	m.openRepairs = append(m.openRepairs, m.freeWordProblems(-1, true)...)
	for i := range m.hdr.Segments {
		sv := m.segment(i)
		s := &sv
		h := s.hdr
		if h.lock.Owner() == 0 && h.version.Load()&1 == 0 && h.intent.Load() == 0 && h.tx.Load() == 0 && h.detached.Load() == 0 {
			continue
		}
		owner := h.lock.Owner()
		if owner != 0 {
			h.lock.ForceUnlock(owner)
		}
		if !h.lock.TryLock(m.witness.Token()) {
			continue
		}
		m.loadTable(s)
		if owner != 0 {
			m.counters().lockTakeovers.Add(1)
			m.openRepairs = append(m.openRepairs, fmt.Sprintf("segment %d: lock held by dead process %d", i, owner.PID()))
		}
		if p := m.repairLocked(s); owner != 0 || len(p) > 0 {
			m.counters().repairs.Add(1)
			m.openRepairs = append(m.openRepairs, p...)
		}
		if n := h.detached.Load(); n != 0 {
			beginChange(s)
			m.reclaimDetachedLocked(s)
			endChange(s)
			m.openRepairs = append(m.openRepairs, fmt.Sprintf("segment %d: reclaimed %d detached entries", i, n))
		}
		h.lock.Unlock()
	}
}

// Recover repairs every segment and returns what it found and fixed, one
// line per problem. It takes each segment's lock in turn (taking it over
// from a dead holder), finishes or undoes what a crashed writer left half
// done, drops entries that damage made unreadable, and rebuilds counts and
// free-space bitmaps. Unlike Chronicle Map's recovery it is safe while
// other processes use the map: they wait for one segment at a time.
//
// The space of entries deleted while value handles pinned them is
// reclaimed only when no other process has the map open and this Map has
// issued no handle.
func (m *Map) Recover() ([]string, error) {
	if err := m.enterWrite(); err != nil {
		return nil, err
	}
	defer m.exitWrite()
	fixed := append([]string(nil), m.openRepairs...)
	m.openRepairs = nil
	m.refresh()
	size := m.fileEnd()
	grown, cut := m.checkGrowth(size, true)
	fixed = append(fixed, grown...)
	fixed = append(fixed, m.freeWordProblems(-1, true)...)
	fixed = append(fixed, m.clearReserved()...)
	if m.damagedGrowth.CompareAndSwap(true, false) {
		m.refresh() // what Open left unmapped: the space claimed but not given storage
	}
	var truncated error
	if cut && m.file != nil {
		truncated = fmt.Errorf("%w: %s: the file ends at %d, before tables or extents its segments named: Recover dropped them, and the entries in them are lost",
			ErrTruncated, m.path, size)
		// Give the cut part storage again, as zeros that nothing names
		// now: a process that still has it mapped reads them instead of
		// faulting.
		if end := max(int(m.growth().allocEnd.Load()), len(m.current())); end > size {
			if err := shm.AllocateShared(m.file, int64(size), int64(end-size)); errors.Is(err, errors.ErrUnsupported) {
				// Zeros written instead, over claimed space alone, which
				// no claimant writes now: claims start at AllocEnd, and
				// the free words naming space there were cleared above
				// (only a take that began before that, and gave its
				// region storage itself, can lose its fill here).
				if claimed := int(m.growth().allocEnd.Load()); claimed > size {
					shm.Grow(m.file, int64(size), int64(claimed-size))
				}
			}
		}
		m.refresh()
	} else if m.file != nil {
		// Cut short past every table and extent: only free or unused
		// space was lost, which this process may still have mapped. Read
		// now, the mapping before the size (as Check): growth since
		// Recover began extends both, and is no cut.
		mapped := len(m.current())
		if now := m.storedSize(); shm.Pad(now, os.Getpagesize()) < mapped {
			// Storage without writing (a claim or take in flight there
			// gives its space storage itself): no fallocate, no storage.
			done := "growth gives that space storage when it takes it"
			if shm.AllocateShared(m.file, int64(now), int64(mapped-now)) == nil {
				done = "the lost part given storage again"
			}
			fixed = append(fixed, fmt.Sprintf("file is %d bytes, shorter than the %d this process mapped: it was truncated while in use, past every table and extent; %s",
				now, mapped, done))
		}
	}
	for i := range m.hdr.Segments {
		sv := m.segment(i)
		s := &sv
		tookOver, err := s.hdr.lock.Lock(m.witness, m.timeout)
		if err != nil {
			return fixed, fmt.Errorf("offmap: %s: segment %d: %w", m.path, i, err)
		}
		m.catchUp()
		m.loadTable(s)
		if tookOver {
			m.counters().lockTakeovers.Add(1)
			fixed = append(fixed, fmt.Sprintf("segment %d: lock held by a dead process", i))
		}
		// Every segment is scanned; one counts as repaired when it had
		// something to repair.
		if p := m.repairLocked(s); tookOver || len(p) > 0 {
			m.counters().repairs.Add(1)
			fixed = append(fixed, p...)
		}
		s.hdr.lock.Unlock()
	}
	if m.handlesIssued.Load() || m.file == nil || shm.Flock(m.file, true, true) != nil {
		if m.file != nil {
			shm.Flock(m.file, false, false) // a failed upgrade may have dropped the shared lock
		}
		return fixed, truncated
	}
	for i := range m.hdr.Segments {
		sv := m.segment(i)
		s := &sv
		if n := s.hdr.detached.Load(); n != 0 && s.hdr.lock.TryLock(m.witness.Token()) {
			m.loadTable(s)
			beginChange(s)
			m.reclaimDetachedLocked(s)
			endChange(s)
			s.hdr.lock.Unlock()
			fixed = append(fixed, fmt.Sprintf("segment %d: reclaimed %d detached entries", i, n))
		}
	}
	return fixed, cmp.Or(shm.Flock(m.file, false, false), truncated)
}

// reclaimDetachedLocked frees the entries deleted while pinned.
func (m *Map) reclaimDetachedLocked(s *segment) {
	t := sharedSlots(s.slots)
	for i := uint32(0); i < t.Len(); {
		w := t.Load(i)
		if w == 0 || w&slotDetached == 0 {
			i++
			continue
		}
		e, _ := m.entryAt(s, slotChunk(w))
		k := m.chunksFor(e.keyLen, e.valLen)
		removeSlot(t, i) // may move a later entry into i: look at i again
		m.freeLocked(s, slotChunk(w), k)
		s.hdr.usedChunks.Add(^uint64(k - 1))
		s.hdr.detached.Add(^uint64(0))
	}
}

// CheckError lists what Check found wrong.
type CheckError struct {
	Path     string
	Problems []string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("offmap: %s: %d problems:\n  %s", e.Path, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CheckError) Unwrap() error { return ErrCorrupt }

// Check verifies the whole map: the header's reserved bytes are zero and
// the file has the size its header says; every entry is inside its
// segment, hashes to its slot and is reachable from it; no two entries
// share space; no chunk is leaked; the counts agree; no lock is held by a
// dead process and no update was left half done. It returns nil when the
// map is sound, or a *CheckError listing each problem. It never changes
// the map (Recover repairs). Each segment is checked with its lock held
// (read-only maps: between two equal versions), so Check may run while
// other processes use the map. A segment whose lock a live process holds
// past the lock timeout, or that a read-only Check saw change at every
// look, is not checked: Check then returns an error wrapping
// ErrLockTimeout, which says nothing of damage.
func (m *Map) Check() error {
	problems, err := m.CheckFile()
	if err != nil {
		return err
	}
	// The mapping first: a writer of this process extends it after the
	// file grew, so a size read after it is at least as long.
	if mapped := len(m.current()); m.file != nil && shm.Pad(m.fileEnd(), os.Getpagesize()) < mapped {
		size := m.fileEnd()
		// Scanning the segments would touch pages the file no longer has.
		return fmt.Errorf("%w: %s: the file is %d bytes, shorter than the %d this process mapped: it was truncated while in use (Recover drops what was cut)",
			ErrTruncated, m.path, size, mapped)
	}
	for i := range int(m.hdr.Segments) {
		p, err := m.CheckSegment(i)
		if err != nil {
			return err
		}
		problems = append(problems, p...)
	}
	if len(problems) > 0 {
		return &CheckError{Path: m.path, Problems: problems}
	}
	return nil
}

// CheckFile checks what lies outside the segments, as Check does: the
// header page's reserved bytes, the file's size, and the places of the
// segments' grown slot tables and extents (inside the claimed growth
// area, inside the file, no two overlapping). Recover clears reserved
// bytes outside the header's checksum, drops tables and extents that
// overlap or were cut off, and moves a wrong end of the claimed space;
// it cannot fix reserved bytes under the checksum or a file shorter than
// its header says: a problem there means a foreign-made or damaged file
// ('offmap copy' rewrites it).
func (m *Map) CheckFile() ([]string, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	g := m.growth()
	for try := 0; ; try++ {
		a, c, mapped := g.allocEnd.Load(), g.freeChanges.Load(), len(m.current())
		p, size, err := m.checkFileOnce()
		if err != nil || len(p) == 0 || try == 100 {
			return p, err
		}
		// A step published between the reads of the file's size, the
		// mapping and the segment headers looks past the end of the file:
		// what was read is evidence only if nothing moved meanwhile.
		if m.file == nil {
			return p, nil
		}
		if again, err := m.statSize(); err == nil && again == size &&
			g.allocEnd.Load() == a && g.freeChanges.Load() == c && len(m.current()) == mapped {
			return p, nil
		}
	}
}

// checkFileOnce is one look of CheckFile's; it returns the file's size.
func (m *Map) checkFileOnce() ([]string, int, error) {
	var p []string
	if i := slices.IndexFunc(m.mem[headerReservedOff:checksumOff], nonZero); i >= 0 {
		// Under the checksum: the file was made so, and Recover does not
		// rewrite a sealed header.
		p = append(p, fmt.Sprintf("header: reserved byte at offset %d is not zero", headerReservedOff+i))
	} else {
		for _, r := range m.outsideReserved() {
			if i := slices.IndexFunc(m.mem[r[0]:r[1]], nonZero); i >= 0 {
				p = append(p, fmt.Sprintf("header: reserved byte at offset %d, outside the checksum, is not zero; recover clears it", r[0]+i))
				break
			}
		}
	}
	size := int64(len(m.current()))
	mapped := len(m.current())
	if m.file != nil {
		m.refresh()
		m.settleTail()
		mapped = len(m.current()) // before the size: see Check
		st, err := m.file.Stat()
		if err != nil {
			return nil, 0, err
		}
		if size = st.Size(); size < int64(m.hdr.FileSize) {
			p = append(p, fmt.Sprintf("file is %d bytes, its header says at least %d", size, m.hdr.FileSize))
		}
	}
	if shm.Pad(size, int64(os.Getpagesize())) < int64(mapped) && m.file != nil {
		p = append(p, fmt.Sprintf("file is %d bytes, shorter than the %d this process mapped: it was truncated while in use", size, mapped))
	}
	grown, _ := m.checkGrowth(min(int(size), mapped), false)
	p = append(p, grown...)
	return append(p, m.freeWordProblems(int(size), false)...), int(size), nil
}

// checkFreeWords checks the free words (free.go) against the regions the
// segments name, in a file of size bytes (-1: its size read after the
// words, which had storage before they were put there); with fix set it
// clears those that fail. stable is false, and nothing checked, if
// tables kept moving to and from the free words all the while.
func (m *Map) checkFreeWords(size int, fix bool) (p []string, stable bool) {
	if !m.reuse {
		return nil, true
	}
	named, free, stable := m.growthSnapshot(1000)
	if !stable {
		return nil, false
	}
	if size < 0 {
		size = m.storedSize()
	}
	return m.checkFree(named, free, size, fix), true
}

// freeWordProblems is checkFreeWords for Check and Recover, which say
// when they could not check.
func (m *Map) freeWordProblems(size int, fix bool) []string {
	p, stable := m.checkFreeWords(size, fix)
	if !stable {
		return []string{"header: tables kept moving to and from the free words while checked; check again"}
	}
	return p
}

// storedSize is the file's size, or the memory's for a map in memory.
func (m *Map) storedSize() int {
	if m.file != nil {
		if n, err := m.statSize(); err == nil {
			return n
		}
	}
	return len(m.current())
}

func nonZero(b byte) bool { return b != 0 }

// clearReserved zeroes the header page's reserved bytes around the event
// counters, which no checksum covers and nothing reads: damage there would
// otherwise fail Check for good.
func (m *Map) clearReserved() []string {
	var fixed []string
	for _, rr := range m.outsideReserved() {
		r := m.mem[rr[0]:rr[1]]
		i := slices.IndexFunc(r, nonZero)
		if i < 0 {
			continue
		}
		shm.Zero(r)
		fixed = append(fixed, fmt.Sprintf("header: reserved bytes [%d, %d) cleared (the first not zero was at offset %d)", rr[0], rr[1], rr[0]+i))
	}
	return fixed
}

// grownRegion is a slot table or extent in the growth area.
type grownRegion struct {
	off, end int
	seg, k   int // k = -1 for a slot table, else the extent
}

// grownRegions returns the tables and extents that the segment headers
// name (a non-zero word, whether valid or not), sorted by offset.
func (m *Map) grownRegions() []grownRegion {
	var rs []grownRegion
	for i := range int(m.hdr.Segments) {
		sh := shm.Overlay[segmentHeader](m.mem, int(m.hdr.SegHeadersOff)+i*segmentHeaderSize)
		if w := sh.table.Load(); w != 0 {
			off, n := tableAt(w)
			rs = append(rs, grownRegion{off, off + 8*n, i, -1})
		}
		for k := 1; k <= m.maxExtent(); k++ {
			if off := int(sh.extents[k-1].Load()); off != 0 {
				rs = append(rs, grownRegion{off, off + m.extentBytes(k), i, k})
			}
		}
	}
	// Ties, which only damage makes, in an order that does not depend on
	// the sort: the shorter first, so that the one reaching further is the
	// one dropped.
	slices.SortFunc(rs, func(a, b grownRegion) int {
		return cmp.Or(cmp.Compare(a.off, b.off), cmp.Compare(a.end, b.end), cmp.Compare(a.seg, b.seg), cmp.Compare(a.k, b.k))
	})
	return rs
}

// checkGrowth checks the segments' grown tables and extents against each
// other, the claimed space and the first size bytes of the file, in
// offset order: each must start at or after the end of the one kept
// before it and end within the file. One that ends past the claimed space
// but within the file is kept, and the claimed space's end is what is
// wrong (no checksum covers it). cut reports a region past the end of
// the file: the file was truncated.
//
// With fix set (Recover, or Open alone) it drops, with the segment
// locked, every region that overlaps an earlier one or was cut, and
// repairs the segment (the entries in it are lost, as damage loses
// them); and it moves the claimed space's end past every region kept, so
// that no claim can hand out space in use.
func (m *Map) checkGrowth(size int, fix bool) (p []string, cut bool) {
	g := m.growth()
	claimed := int(g.allocEnd.Load())
	badEnd := !m.validAllocEnd(uint64(claimed))
	if badEnd {
		p = append(p, fmt.Sprintf("header: the claimed space ends at %d, outside [%d, %d]; %s", claimed, m.hdr.FileSize, m.limit,
			fixWord(fix, "moved to the end of the last table, extent or free region", "recover moves it to the end of the last table, extent or free region")))
	}
	named, free, stable := m.growthSnapshot(1000)
	if !stable {
		// Tables moving to and from the free words all the while: what
		// was read is not evidence of damage.
		return append(p, "header: tables kept moving to and from the free words while checked; check again"), false
	}
	end := int(m.hdr.FileSize) // of the regions kept so far
	for _, r := range named {
		if r.off < int(m.hdr.FileSize) && r.k == -1 {
			continue // a table in an initial body: loadTable allows only the segment's own
		}
		why := m.regionFault(r, end, size)
		if why == "" {
			if r.end > claimed && !badEnd {
				p = append(p, fmt.Sprintf("%s [%d, %d) lies past the claimed space, which ends at %d; %s",
					r.what(), r.off, r.end, claimed, fixWord(fix, "the claimed space's end moved past it", "recover moves the claimed space's end past it")))
			}
			end = r.end
			continue
		}
		if fix {
			s := m.segment(uint32(r.seg))
			if err := m.lock(&s); err != nil {
				continue
			}
			// Sound after all: published by another process after the
			// file's size was read. (The lock's own repair, after a dead
			// holder, may have dropped it already.)
			if why = m.regionFault(r, end, m.fileEnd()); why == "" {
				s.hdr.lock.Unlock()
				end = r.end
				continue
			}
			if r.named(s.hdr) {
				r.drop(s.hdr)
				// And the segment's other unsound regions (reported as the
				// loop reaches them): its repair reads them all.
				m.dropForeignRegions(&s)
				m.repairLocked(&s)
			}
			s.hdr.lock.Unlock()
		}
		// Within the claimed space but past the file: cut off, not a
		// damaged word.
		cut = cut || r.off >= end && r.end > size && r.end <= claimed && !badEnd
		p = append(p, fmt.Sprintf("%s %s; %s", r.what(), why, fixWord(fix, "dropped with its entries", "recover drops it with its entries")))
	}
	if fix {
		if badEnd {
			// Past the free regions too, which were claimed before: no
			// claim may hand out their space while they wait in a word.
			// (Nothing is claimed or taken while AllocEnd is bad.)
			for _, f := range free {
				if m.freeInFile(f, size) {
					end = max(end, f.end)
				}
			}
			// A CAS: another Recover may have repaired it, and a claim
			// moved it on, since it was read.
			g.allocEnd.CompareAndSwap(uint64(claimed), uint64(shm.Pad(end, 64)))
		}
		raiseAllocEnd(g, end)
	}
	return p, cut
}

// checkGrowthAtOpen refuses a file whose growth records disagree with it:
// shorter than the tables and extents its segments name (ErrTruncated),
// or with those overlapping or past the claimed space (ErrCorrupt).
// Opening such a file as if sound would drop them, and the entries in
// them, without a word. With damaged set the map opens anyway, for
// Recover to say what it drops.
func (m *Map) checkGrowthAtOpen(damaged bool) error {
	g := m.growth()
	var p []string
	var cut bool
	// Until two looks agree: a region that another process publishes
	// between the reads of AllocEnd, the headers and the file's size may
	// look past either. Its claim moves AllocEnd, its storage the size.
	for try := 0; try < 100; try++ {
		a, c := g.allocEnd.Load(), g.freeChanges.Load()
		size, err := m.statSize()
		if err != nil {
			return err
		}
		p, cut = m.checkGrowth(size, false)
		if len(p) == 0 {
			return nil
		}
		if again, err := m.statSize(); err == nil && again == size && g.allocEnd.Load() == a && g.freeChanges.Load() == c {
			break
		}
	}
	if damaged {
		m.damagedGrowth.Store(true)
		return nil
	}
	kind := ErrCorrupt
	if cut {
		kind = ErrTruncated
	}
	return fmt.Errorf("%w: its growth records disagree with the file ('offmap recover' drops what is lost and says what):\n  %s",
		kind, strings.Join(p, "\n  "))
}

func (m *Map) statSize() (int, error) {
	st, err := m.file.Stat()
	if err != nil {
		return 0, err
	}
	return int(st.Size()), nil
}

// fixWord says what a repair did, or what Recover would do.
func fixWord(fix bool, done, toDo string) string {
	if fix {
		return done
	}
	return toDo
}

// regionFault says why region r cannot be kept, given that the regions
// kept before it end at end and the file at size, or "".
func (m *Map) regionFault(r grownRegion, end, size int) string {
	switch {
	case r.off < end:
		return fmt.Sprintf("at %d overlaps what lies before it", r.off)
	case r.end > size:
		return fmt.Sprintf("[%d, %d) lies past the end of the file, %d", r.off, r.end, size)
	}
	return ""
}

// raiseAllocEnd moves the claimed space's end up to end (padded to 64)
// if it is below; claims that race with it only move it further.
func raiseAllocEnd(g *growthWords, end int) {
	want := uint64(shm.Pad(end, 64))
	for {
		a := g.allocEnd.Load()
		if a >= want || g.allocEnd.CompareAndSwap(a, want) {
			return
		}
	}
}

func (r grownRegion) what() string {
	if r.k < 0 {
		return fmt.Sprintf("segment %d: slot table", r.seg)
	}
	return fmt.Sprintf("segment %d: extent %d", r.seg, r.k)
}

// named reports whether sh still names r.
func (r grownRegion) named(sh *segmentHeader) bool {
	if r.k < 0 {
		w := sh.table.Load()
		off, _ := tableAt(w)
		return w != 0 && off == r.off
	}
	return int(sh.extents[r.k-1].Load()) == r.off
}

// drop removes r from its segment: the segment goes back to its first
// table, or loses the extent (and, at its repair, the extents after it).
func (r grownRegion) drop(sh *segmentHeader) {
	if r.k < 0 {
		sh.table.Store(0)
	} else {
		sh.extents[r.k-1].Store(0)
	}
}

// dropForeignRegions drops the tables and extents of s (locked, about to
// be repaired) that overlap another segment's or were cut from the file,
// as checkGrowth would: a repair writes bitmaps and slots into its
// segment's regions, and must never write into another segment's. It
// reads the other segments' words without their locks: a region they
// publish meanwhile was claimed or taken while no segment named its
// space (claims are disjoint; a take skips named space), so it overlaps
// none of s's, which is locked.
func (m *Map) dropForeignRegions(s *segment) []string {
	var p []string
	size, end := m.fileEnd(), int(m.hdr.FileSize)
	for _, r := range m.grownRegions() {
		if r.off < int(m.hdr.FileSize) && r.k == -1 {
			continue
		}
		why := m.regionFault(r, end, size)
		if why == "" {
			end = r.end
			if r.seg == s.idx {
				raiseAllocEnd(m.growth(), r.end)
			}
			continue
		}
		if r.seg == s.idx && r.named(s.hdr) {
			r.drop(s.hdr)
			p = append(p, fmt.Sprintf("%s %s; dropped with its entries", r.what(), why))
		}
	}
	return p
}

// fileEnd is how much of the file is both mapped and there: a file cut
// short under this process ends before its mapping.
func (m *Map) fileEnd() int {
	n := len(m.current())
	if m.file != nil {
		if st, err := m.file.Stat(); err == nil {
			n = min(n, int(st.Size()))
		}
	}
	return n
}

// CheckSegment checks segment i (0 <= i < Stats().Segments) as Check does
// and returns its problems, so that a caller can check a large map a
// piece at a time: to show progress, to stop early, or to spread the work.
// CheckFile and CheckSegment of every segment together are Check. An
// error wrapping ErrLockTimeout means the segment could not be checked.
func (m *Map) CheckSegment(i int) ([]string, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if i < 0 || i >= int(m.hdr.Segments) {
		return nil, fmt.Errorf("offmap: segment %d of %d", i, m.hdr.Segments)
	}
	s := m.segment(uint32(i))
	return m.checkSegment(&s)
}

func (m *Map) checkSegment(s *segment) ([]string, error) {
	m.catchUp()
	m.settleTail()
	if owner := s.hdr.lock.Owner(); owner != 0 && !m.witness.Alive(owner) {
		// Do not take the lock over: report what the dead holder left,
		// unless a writer took it over (to repair) while it was read.
		v := s.hdr.version.Load()
		p := m.scanCopy(s)
		if s.hdr.lock.Owner() != owner || s.hdr.version.Load() != v {
			return m.checkSegment(s)
		}
		return append([]string{fmt.Sprintf("segment %d: lock held by dead process %d", s.idx, owner.PID())}, p...), nil
	}
	if m.readOnly {
		for try := 0; ; try++ {
			v := s.hdr.version.Load()
			// Odd under a free lock, and still the same odd version after
			// the lock was seen free: a writer makes the version odd only
			// while it holds the lock, and even again before releasing it,
			// so one that finished between the two loads changed it.
			if v&1 != 0 && s.hdr.lock.Owner() == 0 && s.hdr.version.Load() == v {
				return append([]string{fmt.Sprintf("segment %d: version is odd but no process holds the lock", s.idx)},
					m.scanCopy(s)...), nil
			}
			p := m.scanCopy(s)
			if v&1 == 0 && s.hdr.version.Load() == v {
				return p, nil
			}
			if try > 1000 {
				// What a scan of a changing segment found is not evidence,
				// of damage or of its absence: the check could not be made.
				return nil, fmt.Errorf("%w: %s: segment %d kept changing while checked read-only (a writer at work, or paused in a write); check again",
					ErrLockTimeout, m.path, s.idx)
			}
			shm.Yield()
		}
	}
	// The lock, without the repair that writers do when they find damage
	// or take a dead holder's lock over: Check only reports.
	tookOver, err := s.hdr.lock.Lock(m.witness, m.timeout)
	if err != nil {
		return nil, err // ErrLockTimeout: a live holder, not damage; the check could not be made
	}
	defer s.hdr.lock.Unlock()
	var p []string
	if tookOver {
		m.counters().lockTakeovers.Add(1)
		p = append(p, fmt.Sprintf("segment %d: lock held by a dead process", s.idx))
	}
	if s.hdr.version.Load()&1 != 0 {
		p = append(p, fmt.Sprintf("segment %d: version is odd with no writer", s.idx))
	}
	if s.hdr.intent.Load() != 0 {
		p = append(p, fmt.Sprintf("segment %d: an in-place update was left half done (redo record pending)", s.idx))
	}
	return append(p, m.scanCopy(s)...), nil
}

// scanCopy runs scanSegment on a private copy of s's slots.
func (m *Map) scanCopy(s *segment) []string {
	if !m.loadTable(s) {
		return []string{fmt.Sprintf("segment %d: its slot table word %#x names no valid table (recover goes back to the segment's first table)",
			s.idx, s.hdr.table.Load())}
	}
	t := make(localSlots, len(s.slots))
	for i := range s.slots {
		t[i] = s.slots[i].Load()
	}
	return m.scanSegment(s, t, false)
}
