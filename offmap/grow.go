package offmap

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Growth. Entries and the average sizes are where a map starts. A segment
// that runs out of slots moves to a slot table twice as large; one that
// runs out of entry space adds an extent twice as large as all it has.
// Both are taken from the tables other segments grew out of (free.go) or
// from the end of the file, past AllocEnd, by whichever process needs
// them, under nothing but the segment's own lock: the map never stops,
// and no entry ever moves, so value handles keep their address (the
// mapping is extended in place, in address space reserved for
// MaxFileSize). docs/FORMAT.md says why this design and not
// Chronicle's chained tiers or splitting segments.
//
// Each growth step is: claim space (a freed table that fits, free.go, or
// a CAS on AllocEnd, then fallocate), fill it while it is invisible,
// publish it with one store into the segment header. A process killed
// before the store leaves unreferenced space behind (offmap stat reports
// it; offmap copy reclaims it) and the segment as it was; after the
// store, the step is done.

// growth returns the header's growth words.
func (m *Map) growth() *growthWords { return shm.Overlay[growthWords](m.mem, growthWordsOff) }

// counters returns the header's event counters (format.go). Only writers
// increment them: a read-only open maps the header read-only.
func (m *Map) counters() *counterWords { return shm.Overlay[counterWords](m.mem, counterWordsOff) }

// current returns the mapped part of the file.
func (m *Map) current() []byte { return *m.view.Load() }

// refresh maps what other processes have added to the file since this
// one last looked, and reports whether the view grew. It is only called
// when an offset lies past the view: it makes system calls.
func (m *Map) refresh() bool {
	if m.region == nil || m.closed.Load() {
		return false
	}
	m.growMu.Lock()
	defer m.growMu.Unlock()
	end := int64(m.growth().allocEnd.Load())
	st, err := m.file.Stat()
	if err != nil {
		return false
	}
	size := st.Size()
	page := int64(os.Getpagesize())
	// Not over a file cut shorter than this process mapped, nor over
	// regions Open found cut: that would hide the loss (Check reports
	// it, Recover drops what was cut and says so).
	if size < end && end <= int64(m.limit) && !m.readOnly && !m.damagedGrowth.Load() && shm.Pad(size, page) >= int64(m.region.Len()) {
		// Space claimed by a process that has not given it storage yet,
		// or died before it could: doing it for it is harmless where it
		// writes nothing (fallocate), and this process can then map it.
		if shm.AllocateShared(m.file, size, end-size) == nil {
			size = end
		}
	}
	grew := false
	if target := shm.Pad(min(size, int64(m.limit)), page); target > int64(m.region.Len()) && !m.closed.Load() {
		mem, err := m.region.Extend(m.file, int(target), !m.readOnly)
		if err != nil {
			return false
		}
		m.view.Store(&mem)
		grew = true
	}
	if int64(m.region.Len()) >= end {
		// Only once the claimed space is mapped: catchUp then has nothing
		// more to map until the next claim.
		m.seenEnd.Store(uint64(end))
	}
	return grew
}

// mapsPast maps what other processes have grown and reports whether the
// mapped view is now longer than n bytes: the caller saw n bytes and found
// an offset past them. (refresh's own answer would be false if another
// goroutine had just mapped the same growth.)
func (m *Map) mapsPast(n int) bool {
	m.refresh()
	return len(m.current()) > n || m.mapTail() && len(m.current()) > n
}

// settleTail is mapTail for Check, which reads every region the file
// holds, met or not: it first gives a writer that is still extending the
// file 50 ms to finish. A writer on Windows extends it from one 64 KiB
// boundary to another in one step (shm.Grow), so an end between two is a
// file made elsewhere; mapping a writer's transient end here would end
// this Map's growth (shm.Region.ExtendTail).
func (m *Map) settleTail() {
	if m.region == nil || !m.readOnly {
		return
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for {
		size, err := shm.FileSize(m.file)
		if err != nil || size <= int64(len(m.current())) || m.closed.Load() {
			return
		}
		if time.Now().After(deadline) {
			m.mapTail()
			return
		}
		time.Sleep(time.Millisecond)
		m.refresh()
	}
}

// mapTail maps, for a read-only Map, the end of a file that lies between
// the boundaries refresh maps to on Windows: a file made on another
// system, which no writer here pads (shm.Region.ExtendTail). Only when a
// reader met data there: mapped, it ends the mapping's growth.
func (m *Map) mapTail() bool {
	if m.region == nil || !m.readOnly || m.closed.Load() {
		return false
	}
	m.growMu.Lock()
	defer m.growMu.Unlock()
	before := m.region.Len()
	mem, err := m.region.ExtendTail(m.file)
	if err != nil || len(mem) <= before {
		return false
	}
	m.view.Store(&mem)
	if end := m.growth().allocEnd.Load(); uint64(len(mem)) >= end {
		m.seenEnd.Store(end)
	}
	return true
}

// catchUp maps what other processes grew, for a writer that just took a
// segment lock: every table and extent its segment names was claimed
// before that, so AllocEnd already covers them. One shared load when
// nothing changed.
func (m *Map) catchUp() {
	if m.region != nil && m.growth().allocEnd.Load() != m.seenEnd.Load() {
		m.refresh()
	}
}

// claim takes n bytes (a multiple of 64) for a growth step: a freed
// table's, zeroed, or at the end of the file, given storage. Either way
// they are mapped, and zero unless a damaged file says otherwise; callers
// clear what must be zero.
func (m *Map) claim(n int) (int, error) {
	if off, ok := m.takeFree(n); ok {
		return off, nil
	}
	g := m.growth()
	var start uint64
	for {
		start = g.allocEnd.Load()
		if !m.validAllocEnd(start) {
			return 0, fmt.Errorf("%w: %s: the end of the claimed space, %d, lies outside [%d, %d]",
				ErrCorrupt, m.path, start, m.hdr.FileSize, m.limit)
		}
		if start+uint64(n) > uint64(m.limit) {
			return 0, fmt.Errorf("%w: %s: growing by %d bytes would pass the map's MaxFileSize of %d bytes",
				ErrFull, m.path, n, m.limit)
		}
		if g.allocEnd.CompareAndSwap(start, start+uint64(n)) {
			break
		}
	}
	crash("grow.claimed")
	end := int(start) + n
	if m.file != nil {
		// Only [start, end): the bytes after it may be another claim's,
		// and Grow may write zeros.
		if err := shm.Grow(m.file, int64(start), int64(n)); err != nil {
			g.allocEnd.CompareAndSwap(uint64(end), start) // give it back if no one claimed after
			if errors.Is(err, syscall.ENOSPC) {
				return 0, fmt.Errorf("%w: %s: no space left on the file system to grow: %w", ErrFull, m.path, err)
			}
			return 0, fmt.Errorf("offmap: %s: grow: %w", m.path, err)
		}
		if len(m.current()) < end && !m.mapsPast(end-1) {
			return 0, fmt.Errorf("offmap: %s: could not map the grown file", m.path)
		}
	}
	return int(start), nil
}

// validAllocEnd reports whether a, read from AllocEnd, can be where the
// claimed space ends: within [FileSize, MaxFileSize], 64-aligned.
func (m *Map) validAllocEnd(a uint64) bool {
	return a >= m.hdr.FileSize && a%64 == 0 && a <= uint64(m.limit)
}

// growSlots moves s to a slot table twice as large. The new table is
// filled while no reader can see it, then published with one store; a
// reader that loaded the old table reads the same entries there.
func (m *Map) growSlots(s *segment) error {
	n := len(s.slots)
	nn := min(2*n, maxSlotsLimit)
	if nn == n {
		return fmt.Errorf("%w: %s: segment %d holds its maximum of %d entries (a larger map needs more Segments)",
			ErrFull, m.path, s.idx, tableLimit(n))
	}
	off, err := m.claim(shm.Pad(nn*8, 64))
	if err != nil {
		return err
	}
	mem := m.current()
	grown := shm.U64s(mem, off, nn)
	for i := range grown {
		grown[i].Store(0)
	}
	for i := range s.slots {
		w := s.slots[i].Load()
		if w == 0 {
			continue
		}
		j := homeIn(w, nn)
		for grown[j].Load() != 0 {
			j = next(j, uint32(nn))
		}
		grown[j].Store(w)
		crash("grow.table.copying")
	}
	crash("grow.table.filled")
	old, _ := m.tableOf(s.base, s.hdr.table.Load())
	beginChange(s)
	s.hdr.table.Store(tableWord(off, nn))
	endChange(s)
	crash("grow.table.published")
	m.growth().tablesGrown.Add(1)
	s.mem, s.slots = mem, grown
	// Readers still in the old table fail their version check (free.go).
	m.putFree(old, shm.Pad(n*8, 64))
	return nil
}

// growArea adds s's next extent, twice the size of all it has, so that an
// entry of n chunks fits.
func (m *Map) growArea(s *segment, n int) error {
	k := 1
	for k <= m.maxExtent() && s.hdr.extents[k-1].Load() != 0 {
		k++
	}
	if k > m.maxExtent() || n > m.extentChunks(k) {
		return fmt.Errorf("%w: %s: segment %d has no room for %d more bytes and no more extents",
			ErrFull, m.path, s.idx, n<<m.chunkShift)
	}
	off, err := m.claim(m.extentBytes(k))
	if err != nil {
		return err
	}
	s.mem = m.current()
	shm.Zero(s.mem[off : off+m.extentBitmapBytes(k)])
	crash("grow.extent.cleared")
	s.hdr.extents[k-1].Store(uint64(off))
	crash("grow.extent.published")
	s.hdr.allocHint.Store(uint64(m.extentChunks(k)))
	m.growth().extentsAdded.Add(1)
	return nil
}

// allocOrGrow allocates n chunks in s, growing its entry space when they
// do not fit. The version is odd on entry and on return; it is even while
// the segment grows, which readers need not wait for.
func (m *Map) allocOrGrow(s *segment, n int) (uint32, error) {
	if c, ok := m.allocLocked(s, n); ok {
		return c, nil
	}
	endChange(s)
	err := m.growArea(s, n)
	if err != nil && m.evict && !s.inTx && errors.Is(err, ErrFull) {
		// At the bound: evict until the entry fits.
		for m.evictOne(s) {
			beginChange(s)
			if c, ok := m.allocLocked(s, n); ok {
				return c, nil
			}
			endChange(s)
		}
		beginChange(s)
		return 0, err
	}
	beginChange(s)
	if err != nil {
		return 0, err
	}
	if c, ok := m.allocLocked(s, n); ok {
		return c, nil
	}
	return 0, m.full(s, n)
}

// roomForInsert makes sure s's slot table takes one more entry, growing
// it if needed, and returns the empty slot where key (absent) goes: pos,
// or its place in the new table.
func (m *Map) roomForInsert(s *segment, pos uint32, h keyHash) (uint32, error) {
	if int(s.hdr.count.Load()+s.hdr.detached.Load()) < tableLimit(len(s.slots)) {
		return pos, nil
	}
	if err := m.growSlots(s); err != nil {
		return 0, err
	}
	n := uint32(len(s.slots))
	i := homeIn(h.match, int(n))
	for range n {
		if s.slots[i].Load() == 0 {
			return i, nil
		}
		i = next(i, n)
	}
	return 0, m.corrupt(s, "a grown slot table has no empty slot")
}
