package queue

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Queue is a persisted queue: a directory holding a metadata file and one
// cycle file per roll cycle, shared by every goroutine and process that
// opens it. Appends and tailers are safe for concurrent use; Close must
// come after the queue's other uses have returned.
type Queue struct {
	// What every append reads, in the struct's first cache line: an event
	// loop appending to thousands of queues then misses one line per queue.
	wcur       atomic.Pointer[cycle] // the cycle appends go to (holds a reference)
	rollFlag   atomic.Bool           // without a test clock: raised by rollTimer at its end
	clocked    bool                  // opts.clock is set
	checksums  bool                  // messages carry checksums (flagChecksums)
	spacing    uint                  // log2 of the index spacing
	writerBits uint64                // this process's lease in slot headers
	maxAppend  int64                 // the largest message a cycle file can take
	sleepers   *atomic.Uint32
	wake       waitState // its first field, the listener list, is read by every append

	dir      string
	opts     Options
	meta     metaHeader
	readOnly bool
	witness  *shm.Witness // this open's token, and how it judges other writers

	metaFile *os.File
	metaMap  *shm.Mapping
	lock     *shm.Mutex
	latest   *atomic.Uint64 // latest cycle + 1
	bell     *atomic.Uint32
	leases   []atomic.Uint64 // token, generation pairs
	tailers  []byte          // the named-tailer table

	// The doorbell value this process last found pending when it would
	// have rung, and how many times in a row (see ring).
	pendingBell, pendingRuns atomic.Uint32

	skipped *atomic.Uint64 // event counter in queue.meta: dead-writer slots skipped

	mu      sync.Mutex        // guards cycles, idle, open tailers
	cycles  map[uint32]*cycle // mapped cycle files
	idle    []*cycle          // unreferenced but still mapped, oldest first
	tailSet map[*Tailer]struct{}
	closed  atomic.Bool
	// threadWaiters counts tailers asleep in the kernel on the doorbell
	// (BlockThread): Close wakes them and waits for them to leave before
	// it unmaps the doorbell.
	threadWaiters atomic.Int32

	appendMu  sync.Mutex   // serialises rolls and lease changes
	leaseIdx  int          // -1: no lease yet
	rollAt    atomic.Int64 // with a test clock: when wcur's cycle ends
	rollTimer *time.Timer  // guarded by appendMu
}

// idleCycles is how many unreferenced cycle files a process keeps mapped,
// so that tailers and appenders crossing a roll do not map them again and
// views of a just-left cycle stay readable a while.
const idleCycles = 2

var monoBase = time.Now()

// mono returns monotonic nanoseconds.
func mono() int64 { return int64(time.Since(monoBase)) }

// Open opens the queue in dir, creating the directory and the queue when
// they do not exist (unless opts.ReadOnly). A directory that holds other
// files but no queue gives ErrNotQueue.
func Open(dir string, opts Options) (*Queue, error) {
	o, err := opts.check()
	if err != nil {
		return nil, err
	}
	q, err := open(dir, o)
	if err != nil {
		return nil, &shm.OpError{Pkg: "queue", Op: "open", Path: dir, Err: err}
	}
	return q, nil
}

func open(dir string, o Options) (*Queue, error) {
	if !o.ReadOnly {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%w: not a directory", ErrNotQueue)
	}
	path := filepath.Join(dir, metaName)
	for attempt := 0; ; attempt++ {
		f, readOnly, err := shm.OpenFile(path, o.ReadOnly)
		if errors.Is(err, os.ErrNotExist) && !o.ReadOnly && attempt < 3 {
			err = createMeta(dir, path, o)
			if err == nil || errors.Is(err, os.ErrExist) {
				continue
			}
			return nil, err
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: no %s", ErrNotQueue, metaName)
		}
		if err != nil {
			return nil, err
		}
		q, err := openMeta(dir, f, readOnly, o)
		if err != nil {
			f.Close()
			return nil, err
		}
		return q, nil
	}
}

// createMeta makes a new queue in dir, which must hold no other files.
func createMeta(dir, path string, o Options) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == metaName {
			return os.ErrExist // another process created it meanwhile: open that
		}
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			return fmt.Errorf("%w: it holds %s but no %s", ErrNotQueue, e.Name(), metaName)
		}
	}
	now := time.Now()
	if o.clock != nil {
		now = o.clock()
	}
	h := o.newMeta(now)
	return shm.CreateAtomic(path, o.FileMode, metaSize, true, func(f *os.File) error {
		_, err := f.WriteAt(h.encode(), 0)
		return err
	})
}

func openMeta(dir string, f *os.File, readOnly bool, o Options) (*Queue, error) {
	b, size, alone, err := shm.Attach(f, readOnly, metaSize)
	if err != nil {
		return nil, err
	}
	h, err := decodeMeta(b, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", metaName, err)
	}
	if h.Version == pidTokenVersion && !alone {
		return nil, fmt.Errorf("%s: %w: format version %d, whose lock and writer leases name processes by pid; open it for writing while no other process has it open, and it is upgraded to version %d in place", metaName, ErrVersion, h.Version, formatVersion)
	}
	if err := o.matches(h); err != nil {
		return nil, err
	}
	w, err := shm.NewWitness(f, !readOnly)
	if err != nil {
		return nil, err
	}
	mp, err := shm.Map(f, 0, metaSize, !readOnly)
	if err != nil {
		return nil, err
	}
	m := mp.Bytes()
	q := &Queue{
		dir:       dir,
		opts:      o,
		meta:      *h,
		readOnly:  readOnly,
		witness:   w,
		spacing:   uint(bits.TrailingZeros32(h.IndexSpacing)),
		metaFile:  f,
		metaMap:   mp,
		lock:      shm.MutexAt(m, metaLockOff),
		latest:    shm.U64(m, metaLatestOff),
		bell:      shm.U32(m, metaBellOff),
		sleepers:  shm.U32(m, metaSleepersOff),
		skipped:   shm.U64(m, metaSkippedOff),
		leases:    shm.U64s(m, leaseTableOff, 2*maxLeases),
		tailers:   m[tailerTableOff : tailerTableOff+maxNamedTailers*tailerSlotSize],
		cycles:    make(map[uint32]*cycle),
		tailSet:   make(map[*Tailer]struct{}),
		leaseIdx:  -1,
		clocked:   o.clock != nil,
		checksums: h.Flags&flagChecksums != 0,
		// Room for the message, the cycle's first index array and the
		// header that follows the last slot.
		maxAppend: min(maxMessage, h.MaxCycleSize-dataStart-indexArrayBytes-16),
	}
	if q.checksums {
		q.maxAppend -= sumSize
	}
	if alone {
		q.recoverAlone()
		if h.Version == pidTokenVersion {
			err = upgradeMetaInPlace(f, m)
			q.meta.Version = formatVersion
		}
		if err == nil {
			err = shm.Flock(f, false, false)
		}
		if err != nil {
			q.unmapMeta()
			return nil, err
		}
	}
	return q, nil
}

// Dir returns the queue's directory.
func (q *Queue) Dir() string { return q.dir }

// ReadOnly reports whether appends are refused.
func (q *Queue) ReadOnly() bool { return q.readOnly }

// KeepCycles returns Options.KeepCycles as this process opened the queue
// with: how many cycle files it keeps when it rolls (0: all).
func (q *Queue) KeepCycles() int { return q.opts.KeepCycles }

// RollCycle returns the queue's roll cycle.
func (q *Queue) RollCycle() RollCycle { return q.meta.Roll }

// Close waits for appends in flight, then unmaps the queue's files. Views
// returned by tailers must not be used afterwards, and the queue's tailers
// and reservations must not be used concurrently with Close. A reservation
// still neither committed nor aborted after a second is aborted (readers
// skip it), and Close returns an ErrUncommitted naming its index; its
// Commit then returns ErrClosed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if !q.closed.CompareAndSwap(false, true) {
		q.mu.Unlock()
		return nil
	}
	tailers := make([]*Tailer, 0, len(q.tailSet))
	for t := range q.tailSet {
		tailers = append(tailers, t)
	}
	q.mu.Unlock()
	q.wake.disarmAll(q)
	for q.threadWaiters.Load() > 0 {
		wakeBell(q.bell)
		time.Sleep(50 * time.Microsecond)
	}
	for _, t := range tailers {
		t.Close()
	}
	q.appendMu.Lock()
	if c := q.wcur.Swap(nil); c != nil {
		c.release()
	}
	if q.rollTimer != nil {
		q.rollTimer.Stop()
	}
	q.appendMu.Unlock()
	// Appends in flight hold a reference to their cycle: wait for them, a
	// while. A reservation still open then was left neither committed nor
	// aborted, and readers would wait at it for as long as this process
	// lives: abort it and say so.
	var err error
	for deadline := time.Now().Add(closeWait); ; {
		q.mu.Lock()
		busy := len(q.cycles) > len(q.idle)
		q.mu.Unlock()
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			err = q.abortOutstanding()
			break
		}
		time.Sleep(20 * time.Microsecond)
	}
	// Cycles still referenced (by a reservation's Writing) stay mapped, so
	// that writing into it does not fault; their last release unmaps them.
	q.mu.Lock()
	for _, c := range q.idle {
		if e := c.unmap(); err == nil {
			err = e
		}
	}
	q.idle, q.cycles = nil, nil
	q.mu.Unlock()
	q.releaseLease()
	if e := q.unmapMeta(); err == nil {
		err = e
	}
	return err
}

// closeWait is how long Close waits for appends in flight.
var closeWait = time.Second

func (q *Queue) unmapMeta() error {
	err := q.metaMap.Unmap()
	if e := q.metaFile.Close(); err == nil {
		err = e
	}
	return err
}

// Sync writes the queue's changed pages to disk and waits (msync). Without
// it, messages survive any process crash but not a power loss.
func (q *Queue) Sync() error {
	if q.closed.Load() {
		return ErrClosed
	}
	q.mu.Lock()
	cs := make([]*cycle, 0, len(q.cycles))
	for _, c := range q.cycles {
		cs = append(cs, c)
	}
	q.mu.Unlock()
	for _, c := range cs {
		c.growMu.Lock()
		err := c.reg.Sync()
		c.growMu.Unlock()
		if err != nil {
			return err
		}
	}
	return q.metaMap.Sync()
}

// cycleOf returns the cycle that contains time t.
func (q *Queue) cycleOf(t time.Time) uint32 {
	d := t.Unix() - q.meta.Epoch
	if d < 0 {
		return 0
	}
	n := (d*int64(time.Second) + int64(t.Nanosecond())) / int64(q.meta.RollLength)
	return uint32(min(n, maxCycle))
}

// cycleStart returns the start time of cycle n.
func (q *Queue) cycleStart(n uint32) time.Time {
	return time.Unix(q.meta.Epoch, 0).Add(time.Duration(n) * q.meta.RollLength).UTC()
}

func (q *Queue) cycleName(n uint32) string {
	return q.cycleStart(n).Format(rolls[q.meta.Roll].layout) + cycleSuffix
}

func (q *Queue) cyclePath(n uint32) string { return filepath.Join(q.dir, q.cycleName(n)) }

// parseCycleName returns the cycle a file name stands for.
func (q *Queue) parseCycleName(name string) (uint32, bool) {
	base, ok := strings.CutSuffix(name, cycleSuffix)
	if !ok {
		return 0, false
	}
	t, err := time.Parse(rolls[q.meta.Roll].layout, base)
	if err != nil || t.Unix() < q.meta.Epoch {
		return 0, false
	}
	n := q.cycleOf(t)
	return n, q.cycleName(n) == name
}

// listCycles returns the cycle numbers present in the directory, sorted.
func (q *Queue) listCycles() ([]uint32, error) {
	ents, err := os.ReadDir(q.dir)
	if err != nil {
		return nil, err
	}
	var out []uint32
	for _, e := range ents {
		if n, ok := q.parseCycleName(e.Name()); ok {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// firstCycleFrom returns the first cycle file at or after n.
func (q *Queue) firstCycleFrom(n uint32) (uint32, bool, error) {
	cs, err := q.listCycles()
	if err != nil {
		return 0, false, err
	}
	for _, c := range cs {
		if c >= n {
			return c, true, nil
		}
	}
	return 0, false, nil
}

// Cycles returns the numbers of the queue's cycle files, oldest first.
func (q *Queue) Cycles() ([]uint32, error) { return q.listCycles() }

// Index builds a message index from a cycle and a sequence number.
func Index(cycle, seq uint32) uint64 { return uint64(cycle)<<32 | uint64(seq) }

// SplitIndex returns the cycle and the sequence number of an index.
func SplitIndex(idx uint64) (cycle, seq uint32) { return uint32(idx >> 32), uint32(idx) }

func (q *Queue) event(kind CycleEventKind, n uint32) {
	if q.opts.OnCycle != nil {
		q.opts.OnCycle(CycleEvent{Kind: kind, Cycle: n, Path: q.cyclePath(n)})
	}
}
