package offmap

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/internal/shm"
	"github.com/offmap/offmap/values"
)

// Map is a hash map in a memory-mapped file, shared by every goroutine and
// process that opens the file. All methods are safe for concurrent use.
type Map struct {
	path   string
	file   *os.File    // nil for a heap-backed map
	region *shm.Region // the mapping, in address space reserved for MaxFileSize
	// mem is the file's first FileSize bytes: header page, segment headers
	// and initial segment bodies. It never changes.
	mem []byte
	// view is all of the file this process has mapped: mem, then the
	// growth area as far as any process had grown it when this one last
	// looked. Its address never changes; it only gets longer.
	view atomic.Pointer[[]byte]
	// limit is where the file stops growing: MaxFileSize, or the end of a
	// heap-backed map's memory.
	limit   int
	growMu  sync.Mutex    // serialises this process's mapping extensions
	seenEnd atomic.Uint64 // AllocEnd when the mapping was last extended
	hdr     header
	// bufs holds, per segment, this process's scratch memory for Update;
	// the segment lock serialises its users.
	bufs       [][]byte
	chunkShift uint
	extBits    int  // B: 2^B is the first chunk of extent 1
	trailer    int  // bytes after each entry's value: checksum, expiry time
	sums       bool // entries carry a checksum
	expiring   bool // entries carry an expiry time
	ttl        int64
	// evict: the map evicts (evict.go); evictCap is a segment's entry
	// bound. matchBits are the slot bits a lookup compares (slotMatch,
	// less the access count where the map evicts).
	evict    bool
	evictCap int
	// reuse: growth takes freed slot tables from the free words first
	// (flagReuse, free.go).
	reuse     bool
	areas     []evictArea // of each segment, where the map evicts
	matchBits uint64
	area0Len  int // bytes of extent 0
	readOnly  bool
	// deadWriters holds the tokens of the last holders that this
	// read-only process found dead (readStep).
	deadWriters [8]atomic.Uint64
	deadNext    atomic.Uint32
	witness     *shm.Witness // this open's token, and how it judges other holders
	timeout     time.Duration
	guard       *values.Guard

	// keysScratch pools the *keysScratch of UpdateKeys and ViewKeys.
	keysScratch sync.Pool

	// openRepairs lists what Open repaired when it found itself alone.
	openRepairs []string
	// damagedGrowth: opened with OpenDamaged over growth records that
	// disagree with the file; until Recover, the file is not extended
	// over what they name.
	damagedGrowth atomic.Bool
	handlesIssued atomic.Bool

	closed  atomic.Bool
	writers atomic.Int64 // write operations in flight; Close waits for them
	closeMu sync.Mutex
}

// Open opens the map file at path, creating it from opts if it does not
// exist. Processes racing to create the same path all end up with the same
// map: the file appears at path only when complete.
func Open(path string, opts Options) (*Map, error) {
	for attempt := 0; ; attempt++ {
		f, readOnly, err := shm.OpenFile(path, opts.ReadOnly)
		if errors.Is(err, os.ErrNotExist) && !opts.ReadOnly && attempt < 3 {
			err = create(path, opts)
			if err == nil || errors.Is(err, os.ErrExist) {
				continue // created, or another process did: open it
			}
			return nil, &shm.OpError{Pkg: "offmap", Op: "create", Path: path, Err: err}
		}
		if err != nil {
			return nil, &shm.OpError{Pkg: "offmap", Op: "open", Path: path, Err: err}
		}
		m, err := openMapped(f, path, readOnly, opts)
		if err != nil {
			f.Close()
			return nil, &shm.OpError{Pkg: "offmap", Op: "open", Path: path, Err: err}
		}
		return m, nil
	}
}

func randomSeed() uint64 {
	var b [8]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

func create(path string, opts Options) error {
	h, err := plan(opts, randomSeed())
	if err != nil {
		return err
	}
	// A zero-filled file is an empty map: only the header page is written.
	size := shm.Pad(int64(h.FileSize), shm.ViewAlign)
	return shm.CreateAtomic(path, opts.fileMode(), size, true, func(f *os.File) error {
		_, err := f.WriteAt(h.encode(), 0)
		return err
	})
}

func openMapped(f *os.File, path string, readOnly bool, opts Options) (*Map, error) {
	page, size, exclusive, err := shm.Attach(f, readOnly, headerSize)
	if err != nil {
		return nil, err
	}
	h, err := decodeHeader(page, size)
	if err != nil {
		return nil, err
	}
	if h.Version == pidTokenVersion && !exclusive {
		return nil, fmt.Errorf("%w: format version %d, whose lock words name processes by pid; open it for writing while no other process has it open, and it is upgraded to version %d in place (or run 'offmap upgrade FILE')", ErrVersion, h.Version, formatVersion)
	}
	if err := opts.checkAgainst(h); err != nil {
		return nil, err
	}
	w, err := shm.NewWitness(f, !readOnly)
	if err != nil {
		return nil, err
	}
	reg, err := shm.Reserve(int(h.MaxFileSize))
	if err != nil {
		return nil, reserveError(h.MaxFileSize, err)
	}
	mem, err := reg.Extend(f, int(h.FileSize), !readOnly)
	if err != nil {
		reg.Unmap()
		return nil, err
	}
	m := newMap(path, *h, mem, readOnly, w, opts)
	m.file, m.region, m.limit = f, reg, int(h.MaxFileSize)
	if err := m.checkGrowthAtOpen(opts.OpenDamaged); err != nil {
		m.Close()
		return nil, err
	}
	m.refresh() // the growth area, as far as other processes took it
	if !readOnly && !exclusive && !m.damagedGrowth.Load() {
		// Free words that name space in use, or none, would be reported
		// by Check; clearing them only leaves their space unused.
		// (Words that kept moving all the while are in use, not damage.)
		m.openRepairs, _ = m.checkFreeWords(-1, true)
	}
	if exclusive {
		if !m.damagedGrowth.Load() { // else Recover repairs, descriptors first
			m.recoverAlone()
		}
		if h.Version == pidTokenVersion {
			// Alone, every old token is a dead holder's: no process of
			// the old version has the file open.
			err = upgradeInPlace(f, m.mem[:headerSize])
			m.hdr.Version = formatVersion
		}
		if err == nil {
			err = shm.Flock(f, false, false)
		}
		if err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

func newMap(path string, h header, mem []byte, readOnly bool, w *shm.Witness, opts Options) *Map {
	m := &Map{
		path:       path,
		mem:        mem[:h.FileSize],
		limit:      len(mem),
		hdr:        h,
		chunkShift: uint(bits.TrailingZeros32(h.ChunkSize)),
		extBits:    bits.Len64(h.ChunksPerSegment - 1),
		trailer:    h.trailer(),
		sums:       h.EntryFlags&flagChecksums != 0,
		expiring:   h.EntryFlags&flagExpiry != 0,
		ttl:        h.TTL,
		evict:      h.EntryFlags&flagEvict != 0,
		reuse:      h.EntryFlags&flagReuse != 0,
		evictCap:   int(h.EvictCap),
		matchBits:  slotMatch,
		readOnly:   readOnly,
		witness:    w,
		timeout:    opts.lockTimeout(),
		guard:      values.NewGuard("its map " + path),
	}
	m.area0Len = int(h.ChunksPerSegment) << m.chunkShift
	if m.evict {
		m.matchBits = slotMatch &^ slotFreqMask
		m.areas = m.evictAreas()
	}
	m.view.Store(&mem)
	m.bufs = make([][]byte, h.Segments)
	return m
}

// openHeap makes a map in ordinary Go memory: for tests under the race
// detector, which cannot see mapped memory. It may grow to 8 times its
// starting size (or MaxFileSize, if less).
func openHeap(opts Options) (*Map, error) {
	h, err := plan(opts, randomSeed())
	if err != nil {
		return nil, err
	}
	mem := shm.Heap(int(min(h.MaxFileSize, 8*h.FileSize)))
	copy(mem, h.encode())
	return newMap("(heap)", h, mem, false, shm.LocalWitness(), opts), nil
}

// Path returns the file the map lives in.
func (m *Map) Path() string { return m.path }

// ReadOnly reports whether writes are refused.
func (m *Map) ReadOnly() bool { return m.readOnly }

// Close releases the map. It waits for writes in flight in this process.
// Value handles acquired from the map panic with a clear message when used
// afterwards; the address range stays reserved (as private zero pages) so
// that no stale pointer can fault.
func (m *Map) Close() error {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	for m.writers.Load() != 0 {
		time.Sleep(50 * time.Microsecond)
	}
	m.guard.Close()
	var err error
	if m.region != nil {
		m.growMu.Lock()
		err = m.region.Release()
		m.growMu.Unlock()
	}
	if m.file != nil {
		if cerr := m.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Sync writes the map's changed pages to the file and waits for the disk
// (msync). Without it, data survives any process crash but not a power
// loss: the kernel writes pages back on its own schedule.
func (m *Map) Sync() error {
	if err := m.enterWrite(); err != nil {
		if errors.Is(err, ErrReadOnly) {
			return nil
		}
		return err
	}
	defer m.exitWrite()
	if m.region == nil {
		return nil
	}
	m.growMu.Lock()
	defer m.growMu.Unlock()
	return m.region.Sync()
}

// enterWrite registers a write in flight, so that Close waits for it.
func (m *Map) enterWrite() error {
	m.writers.Add(1)
	if m.closed.Load() {
		m.writers.Add(-1)
		return ErrClosed
	}
	if m.readOnly {
		m.writers.Add(-1)
		return ErrReadOnly
	}
	return nil
}

func (m *Map) exitWrite() { m.writers.Add(-1) }

// withKey runs f with key's segment locked, as a write in flight that
// Close waits for.
// The segment goes to f by value: a pointer passed to a function value
// would make it escape to the heap, an allocation per write.
func (m *Map) withKey(key []byte, f func(s segment, h keyHash) error) error {
	if err := m.enterWrite(); err != nil {
		return err
	}
	defer m.exitWrite()
	h := m.hash(key)
	m.prefetchFirstHome(h)
	s := m.segment(h.seg)
	if m.evict {
		shm.PrefetchObject(m.areas[h.seg].ctl) // while the lock is taken
	}
	if err := m.lock(&s); err != nil {
		return err
	}
	defer s.hdr.lock.Unlock() // also when f panics (Update's function)
	m.stampExpiry(&s)
	return f(s, h)
}

// lock takes s's lock; if its holder had died, it repairs the segment.
func (m *Map) lock(s *segment) error {
	tookOver, err := s.hdr.lock.Lock(m.witness, m.timeout)
	if err != nil {
		return fmt.Errorf("offmap: %s: segment %d: %w", m.path, s.idx, err)
	}
	if tookOver {
		m.counters().lockTakeovers.Add(1)
	}
	// Another process may have grown the segment since s was loaded.
	m.catchUp()
	tableOK := m.loadTable(s)
	// A free lock over an odd version, a pending redo record or a table
	// outside the file is left by no crash, only by damage: repair it like
	// a dead holder's.
	if tookOver || !tableOK || s.hdr.version.Load()&1 != 0 || s.hdr.intent.Load() != 0 || s.hdr.tx.Load() != 0 {
		m.dropForeignRegions(s)
		m.repairLocked(s)
		m.counters().repairs.Add(1)
		if s.hdr.tx.Load() != 0 {
			// An interrupted UpdateKeys whose other segments could not
			// be locked in time: s keeps its word until they are.
			s.hdr.lock.Unlock()
			return fmt.Errorf("offmap: %s: segment %d: an interrupted UpdateKeys could not be completed yet: %w", m.path, s.idx, ErrLockTimeout)
		}
	}
	return nil
}

// Writers bump the segment version to odd before their first change and
// back to even after the last, so optimistic readers can tell.
func beginChange(s *segment) {
	if !s.inTx {
		s.hdr.version.Add(1)
	}
}

func endChange(s *segment) {
	if !s.inTx {
		s.hdr.version.Add(1)
	}
}
