package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"

	"github.com/offmap/offmap/internal/shm"
)

// cycle is one cycle file mapped by this process: the header page, then
// as much of the file as it holds, behind which the mapping grows inside
// an address range reserved for the largest cycle file.
type cycle struct {
	// What every append reads and writes, in the first cache line.
	refs atomic.Int64 // appender role, tailers, appends in flight
	view shm.View     // the mapped prefix; only grows
	// local is where this process's last append ended (packed like the
	// hint; 0 when unknown). An appender tries the slot there first and
	// reads the shared hint only when another appender got there before
	// it, so a lone writer touches the file only where it writes.
	local    atomic.Uint64
	touched  atomic.Int64 // pages before it are faulted in (pretouch.go)
	ahead    atomic.Bool  // a pretouch request is pending
	writable bool
	q        *Queue
	num      uint32

	prev    uint64 // previous cycle + 1, 0 for the first
	created int64  // the header's creation time, Unix nanoseconds
	f       *os.File
	reg     *shm.Region
	growMu  sync.Mutex // serialises mapping and file growth

	unmapped atomic.Bool // unmap has run

	afterPopulate func() // tests: runs in pretouch after the pages are faulted in (a nil check per pretouched block)

	hint *atomic.Uint64
	next *atomic.Uint64
	l1   []atomic.Uint64
}

// acquire returns cycle n with a reference, mapping it if needed. With
// create set, a missing file is created (its previous cycle is prev+1);
// without it a missing file is an error wrapping os.ErrNotExist.
func (q *Queue) acquire(n uint32, create bool, prev uint64) (*cycle, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return nil, false, ErrClosed
	}
	if c := q.cycles[n]; c != nil {
		if c.refs.Add(1) == 1 {
			q.unidle(c)
		}
		return c, false, nil
	}
	c, created, err := q.mapCycle(n, create, prev)
	if err != nil {
		return nil, false, err
	}
	c.refs.Store(1)
	q.cycles[n] = c
	return c, created, nil
}

// unidle takes c off the idle list and reports whether it was there.
func (q *Queue) unidle(c *cycle) bool {
	for i, x := range q.idle {
		if x == c {
			q.idle = append(q.idle[:i], q.idle[i+1:]...)
			return true
		}
	}
	return false
}

// tryRef takes a reference on a cycle that still has one.
func (c *cycle) tryRef() bool {
	for {
		n := c.refs.Load()
		if n <= 0 {
			return false
		}
		if c.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// repeatedUnmaps counts unmap calls on an already unmapped cycle: a
// reference-counting bug, which tests assert never happens.
var repeatedUnmaps atomic.Int64

// release drops a reference. The last one parks the cycle among the idle
// mappings; the oldest idle mapping is then unmapped.
func (c *cycle) release() {
	if c.refs.Add(-1) != 0 {
		return
	}
	q := c.q
	q.mu.Lock()
	if c.refs.Load() != 0 {
		q.mu.Unlock()
		return
	}
	if q.cycles[c.num] != c {
		// Forgotten while in use (its file deleted): its last user unmaps it.
		q.mu.Unlock()
		c.unmap()
		return
	}
	if q.closed.Load() {
		q.idle = append(q.idle, c)
		q.mu.Unlock()
		return
	}
	q.idle = append(q.idle, c)
	var evict *cycle
	if len(q.idle) > idleCycles {
		evict = q.idle[0]
		q.idle = q.idle[1:]
		delete(q.cycles, evict.num)
	}
	q.mu.Unlock()
	if evict != nil {
		evict.unmap()
		q.event(CycleReleased, evict.num)
	}
}

func (c *cycle) unmap() error {
	// A second unmap could remove whatever the kernel has since mapped at
	// the same address: refuse it, and count it so that tests notice.
	if !c.unmapped.CompareAndSwap(false, true) {
		repeatedUnmaps.Add(1)
		return nil
	}
	err := c.reg.Unmap()
	if e := c.f.Close(); err == nil {
		err = e
	}
	return err
}

// afterCycleCreate, set by tests, runs in mapCycle between the creation
// of a cycle file and its opening.
var afterCycleCreate func(q *Queue, n uint32)

// mapCycle opens (or creates) cycle file n and maps it. A file created
// here may be gone before it is opened, when the queue has rolled past n
// and another process's retention deleted it: the error then wraps
// os.ErrNotExist, as for a file that was never there.
func (q *Queue) mapCycle(n uint32, create bool, prev uint64) (*cycle, bool, error) {
	path := q.cyclePath(n)
	created := false
	f, readOnly, err := shm.OpenFile(path, q.readOnly)
	if errors.Is(err, os.ErrNotExist) && create && !q.readOnly {
		err = q.createCycle(path, n, prev)
		if err == nil {
			created = true
			if afterCycleCreate != nil {
				afterCycleCreate(q, n)
			}
		}
		if err == nil || errors.Is(err, os.ErrExist) {
			f, readOnly, err = shm.OpenFile(path, false)
		}
	}
	if err != nil {
		return nil, false, err
	}
	c, err := q.mapCycleFile(f, n, !readOnly)
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return c, created, nil
}

func (q *Queue) createCycle(path string, n uint32, prev uint64) error {
	h := cycleHeader{
		Version:      cycleVersion,
		Cycle:        uint64(n),
		Prev:         prev,
		IndexSpacing: q.meta.IndexSpacing,
		Created:      q.wallNow().UnixNano(),
	}
	size := shm.Pad(int64(max(q.opts.BlockSize, 2*headerSize)), shm.ViewAlign)
	size = min(size, q.meta.MaxCycleSize)
	return shm.CreateAtomic(path, q.opts.FileMode, size, false, func(f *os.File) error {
		_, err := f.WriteAt(append(h.encode(), startPad()...), 0)
		return err
	})
}

// startPad returns the header of the slot a cycle starts with: metadata
// taking a random number of cache lines, 1 to 63 (never the whole first
// page, whose end may be the file's end: writers leave room for a header
// after the last slot). Queues written in lockstep (the same messages at
// the same rate, as the services of the EDA benchmark write theirs) would
// otherwise cross into a new page at the same moment, and a page crossing
// costs TLB and cache misses: 3,000 queues crossing together stalled
// their event loop for 30 ms every 128 ms. Whole lines keep the slots
// after it aligned as they were.
func startPad() []byte {
	return binary.LittleEndian.AppendUint64(nil, flagMeta|uint64(startPadLines()*64-8))
}

// startPadLines draws the start padding's length in cache lines; tests
// replace it.
var startPadLines = func() int { return 1 + rand.IntN(pageSize/64-1) }

func (q *Queue) mapCycleFile(f *os.File, n uint32, writable bool) (*cycle, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file", ErrForeign)
	}
	b := make([]byte, min(st.Size(), headerSize))
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	h, err := decodeCycle(b, st.Size())
	if err != nil {
		return nil, err
	}
	switch {
	case h.Cycle != uint64(n):
		return nil, fmt.Errorf("%w: file of cycle %d holds cycle %d", ErrCorrupt, n, h.Cycle)
	case h.IndexSpacing != q.meta.IndexSpacing:
		return nil, fmt.Errorf("%w: index spacing %d, the queue's is %d", ErrCorrupt, h.IndexSpacing, q.meta.IndexSpacing)
	}
	reg, err := shm.Reserve(int(q.meta.MaxCycleSize))
	if err != nil {
		return nil, err
	}
	c := &cycle{q: q, num: n, prev: h.Prev, created: h.Created, f: f, reg: reg, writable: writable}
	mem, err := reg.Extend(f, int(min(st.Size(), q.meta.MaxCycleSize)&^(pageSize-1)), writable)
	if err != nil {
		reg.Unmap()
		return nil, err
	}
	c.setView(mem)
	c.hint = shm.U64(mem, hintOff)
	c.next = shm.U64(mem, nextOff)
	c.l1 = shm.U64s(mem, l1Off, l1Entries)
	return c, nil
}

func (c *cycle) setView(mem []byte) { c.view.Set(mem) }

// mem returns the mapped prefix of the file.
func (c *cycle) mem() []byte { return c.view.Bytes() }

// refresh maps whatever the file has grown to, up to the reservation, and
// returns the mapped prefix. Callers compare its length with what they
// need: a header the writers promised is always inside the file.
func (c *cycle) refresh(need int64) ([]byte, error) {
	c.growMu.Lock()
	defer c.growMu.Unlock()
	mem := c.mem()
	if int64(len(mem)) >= need {
		return mem, nil
	}
	st, err := c.f.Stat()
	if err != nil {
		return mem, err
	}
	if err := c.shorterThanMapped(st.Size(), len(mem)); err != nil {
		return mem, err
	}
	size := min(st.Size(), c.q.meta.MaxCycleSize) &^ (pageSize - 1)
	if size <= int64(len(mem)) {
		return mem, nil
	}
	mem, err = c.reg.Extend(c.f, int(size), c.writable)
	if err != nil {
		return c.mem(), err
	}
	c.setView(mem)
	return mem, nil
}

// shorterThanMapped returns an ErrTruncated error when the file, of size
// bytes, is shorter than the mapped bytes: files only grow, so someone
// truncated it while in use. Reading the mapping past its end would raise
// SIGBUS, and growing it again would hide the loss.
func (c *cycle) shorterThanMapped(size int64, mapped int) error {
	if size >= int64(mapped) {
		return nil
	}
	return fmt.Errorf("%w: cycle file %s is %d bytes, shorter than the %d mapped: truncated while in use", ErrTruncated, c.q.cyclePath(c.num), size, mapped)
}

// checkSize compares the file's size with the mapped prefix (one fstat):
// where a walk may go far without reaching the mapped end (Check, Stats,
// seeks to the end, an idle tailer), it finds a truncated file before the
// walk faults. Reaching the mapped end, refresh does the same.
//
// The mapped length is read before the file's size: a grower extends the
// file before it maps more, so a mapping read first is never longer than
// the file unless the file was cut; read after, it may take in a growth
// the size missed and report a truncation that did not happen.
func (c *cycle) checkSize() error {
	mapped := len(c.mem())
	size, err := c.fileSize()
	if err != nil {
		return err
	}
	return c.shorterThanMapped(size, mapped)
}

// fileSize returns the file's size without allocating (os.File.Stat
// does), so that the tailer's seeks and waits stay allocation-free.
func (c *cycle) fileSize() (int64, error) {
	return shm.FileSize(c.f)
}

// grow makes the file hold at least need bytes, preallocated in blocks,
// and maps them. A full disk is an error here, never a SIGBUS later.
func (c *cycle) grow(need int64) ([]byte, error) {
	if need > c.q.meta.MaxCycleSize {
		return c.mem(), ErrCycleFull
	}
	mem, err := c.refresh(need)
	if err != nil || int64(len(mem)) >= need {
		return mem, err
	}
	c.growMu.Lock()
	defer c.growMu.Unlock()
	// Again under growMu, just before the file grows: a truncation since
	// refresh looked must not be hidden by growing the file back.
	if err := c.checkSize(); err != nil {
		return c.mem(), err
	}
	block := int64(c.q.opts.BlockSize)
	size := min((need+block-1)/block*block, c.q.meta.MaxCycleSize)
	if err := shm.Preallocate(c.f, size); err != nil {
		return c.mem(), err
	}
	mem, err = c.reg.Extend(c.f, int(size), c.writable)
	if err != nil {
		return c.mem(), err
	}
	c.setView(mem)
	return mem, nil
}

// Slot walking. A position is a slot boundary and the sequence number of
// the next message at or after it.
