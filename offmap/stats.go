package offmap

import (
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Stats describes a map's layout, growth and fill. Counts of entries are
// ints, as Len and Options.Entries are; sizes in bytes are int64.
type Stats struct {
	Path             string
	FormatVersion    int
	FileSize         int64 // now: the starting size and all growth so far
	StartFileSize    int64 // when created
	MaxFileSize      int64 // the file grows no further
	Created          time.Time
	Capacity         int // Entries the map was created with room for: where it started, not a limit
	Len              int // live entries
	Detached         int // entries deleted while value handles pinned them
	AverageKeySize   int
	AverageValueSize int
	MaxKeySize       int
	MaxValueSize     int
	Segments         int
	SlotsPerSegment  int // in each segment's first slot table
	MaxPerSegment    int // entries a segment took before its first growth
	ChunkSize        int
	ChunksPerSegment int   // in each segment's first extent
	EntrySpace       int64 // bytes of entry space in all segments, grown included
	BytesUsed        int64 // bytes of entry space taken
	TablesGrown      int   // times a segment moved to a slot table twice as large
	ExtentsAdded     int   // times a segment added entry space
	// UnusedBytes is growth space that no segment uses: the slot tables
	// segments grew out of, and steps cut short by a crash. offmap copy
	// reclaims it.
	UnusedBytes int64
	// Reused counts the growth steps that took freed space (a slot table
	// a segment grew out of) instead of extending the file.
	Reused int
	// ReusableBytes is the part of UnusedBytes that the map's next growth
	// steps take before they extend the file: freed slot tables, in maps
	// that do not evict.
	ReusableBytes int64
	// ChecksumEntries: entries carry a checksum that Check verifies.
	ChecksumEntries bool
	// Expiring: entries may expire (TTL is the default time to live);
	// Expired counts those that have and await reclaiming (Sweep). Len
	// counts them too.
	Expiring bool
	TTL      time.Duration
	Expired  int
	// Events of every process since the file was made, from counters in
	// its header (docs/FORMAT.md); 0 in a file whose writers predate them.
	// LockTakeovers counts segment locks taken over from a dead holder;
	// Repairs, segments repaired after a dead holder or damage (writers,
	// Recover, the open of a map no other process has open);
	// ExpiredRemoved, expired entries deleted by writers and Sweep.
	LockTakeovers  int
	Repairs        int
	ExpiredRemoved int
	// Evict: the map evicts (Options.Evict), holding at most EvictBound
	// entries (Entries/Segments in each segment). Its counters, of every
	// process since the file was made: Hits and Misses of reads (Get,
	// AppendValue, Has, GetMany; by processes that may write the file:
	// ViewKeys, Range and read-only processes count nothing),
	// Evictions and EvictedBytes (entry space freed by them; expired
	// entries count in ExpiredRemoved instead).
	Evict        bool
	EvictBound   int
	Hits         int64
	Misses       int64
	Evictions    int64
	EvictedBytes int64
	ReadOnly     bool
	PerSegment   []SegmentStats
}

// SegmentStats describes one segment.
type SegmentStats struct {
	Entries     int
	Detached    int
	Slots       int   // in its slot table now
	MaxEntries  int   // entries it takes before its slot table grows
	Extents     int   // pieces of entry space: 1 until it first grows
	EntrySpace  int64 // bytes of entry space
	BytesUsed   int64
	LockHolder  int  // pid holding the segment lock, or 0
	HolderDead  bool // the holder is gone: the next writer takes over
	Writing     bool // a write is in progress (or was, if its writer died)
	RedoPending bool // an in-place value update is in progress or was interrupted
}

// Stats returns the map's layout and current fill. It takes no lock:
// while others write, each figure is of its own instant, and Expired, a
// scan of every slot, is approximate.
func (m *Map) Stats() Stats {
	h := &m.hdr
	st := Stats{
		Path:             m.path,
		FormatVersion:    int(h.Version),
		FileSize:         int64(h.FileSize),
		StartFileSize:    int64(h.FileSize),
		MaxFileSize:      int64(h.MaxFileSize),
		Created:          time.Unix(0, h.Created),
		Capacity:         int(h.Entries),
		AverageKeySize:   int(h.AvgKey),
		AverageValueSize: int(h.AvgValue),
		MaxKeySize:       int(h.MaxKey),
		MaxValueSize:     int(h.MaxValue),
		Segments:         int(h.Segments),
		SlotsPerSegment:  int(h.SlotsPerSegment),
		MaxPerSegment:    int(h.MaxPerSegment),
		ChunkSize:        int(h.ChunkSize),
		ChunksPerSegment: int(h.ChunksPerSegment),
		ReadOnly:         m.readOnly,
		ChecksumEntries:  m.sums,
		Expiring:         m.expiring,
		TTL:              time.Duration(m.ttl),
		Evict:            m.evict,
		EvictBound:       m.evictCap * int(h.Segments),
	}
	if m.closed.Load() {
		return st
	}
	g := m.growth()
	end := int64(g.allocEnd.Load())
	st.FileSize = max(end, st.StartFileSize)
	st.TablesGrown, st.ExtentsAdded, st.Reused = int(g.tablesGrown.Load()), int(g.extentsAdded.Load()), int(g.reused.Load())
	st.UnusedBytes = max(0, end-st.StartFileSize)
	c := m.counters()
	st.LockTakeovers, st.Repairs, st.ExpiredRemoved = int(c.lockTakeovers.Load()), int(c.repairs.Load()), int(c.expiredRemoved.Load())
	st.PerSegment = make([]SegmentStats, m.hdr.Segments)
	for i := range m.hdr.Segments {
		s := m.segment(i)
		sh := s.hdr
		ss := SegmentStats{
			Entries:     int(sh.count.Load()),
			Detached:    int(sh.detached.Load()),
			Slots:       len(s.slots),
			MaxEntries:  tableLimit(len(s.slots)),
			Extents:     1,
			EntrySpace:  int64(m.area0Len),
			BytesUsed:   int64(sh.usedChunks.Load()) << m.chunkShift,
			Writing:     sh.version.Load()&1 != 0,
			RedoPending: sh.intent.Load() != 0,
		}
		if sh.table.Load() != 0 {
			st.UnusedBytes -= int64(shm.Pad(8*len(s.slots), 64))
		}
		for k := 1; k <= m.maxExtent() && sh.extents[k-1].Load() != 0; k++ {
			ss.Extents++
			ss.EntrySpace += int64(m.extentChunks(k)) << m.chunkShift
			st.UnusedBytes -= int64(m.extentBytes(k))
		}
		if owner := sh.lock.Owner(); owner != 0 {
			ss.LockHolder = owner.PID()
			ss.HolderDead = !m.witness.Alive(owner)
		}
		st.PerSegment[i] = ss
		st.Len += ss.Entries
		st.Detached += ss.Detached
		st.BytesUsed += ss.BytesUsed
		if m.expiring {
			st.Expired += m.expiredCount(&s, now())
		}
		if m.evict {
			c := m.areas[i].ctr
			st.Hits += int64(c.hits.Load())
			st.Misses += int64(c.misses.Load())
			st.Evictions += int64(c.evictions.Load())
			st.EvictedBytes += int64(c.evictedBytes.Load())
		}
		st.EntrySpace += ss.EntrySpace
	}
	st.UnusedBytes = max(0, st.UnusedBytes)
	st.ReusableBytes = min(m.reusableBytes(), st.UnusedBytes)
	return st
}
