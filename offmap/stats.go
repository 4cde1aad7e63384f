package offmap

import (
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Stats describes a map's layout and fill. Counts of entries are ints, as
// Len and Options.Entries are; sizes in bytes are int64.
type Stats struct {
	Path             string
	FormatVersion    int
	FileSize         int64
	Created          time.Time
	Capacity         int // Entries the map was created for
	Len              int // live entries
	Detached         int // entries deleted while value handles pinned them
	AverageKeySize   int
	AverageValueSize int
	MaxKeySize       int
	MaxValueSize     int
	Segments         int
	SlotsPerSegment  int
	MaxPerSegment    int // entries one segment can hold
	ChunkSize        int
	ChunksPerSegment int
	EntrySpace       int64 // bytes of entry space in all segments
	BytesUsed        int64 // bytes of entry space taken
	ReadOnly         bool
	PerSegment       []SegmentStats
}

// SegmentStats describes one segment.
type SegmentStats struct {
	Entries     int
	Detached    int
	BytesUsed   int64
	LockHolder  int  // pid holding the segment lock, or 0
	HolderDead  bool // the holder is gone: the next writer takes over
	Writing     bool // a write is in progress (or was, if its writer died)
	RedoPending bool // an in-place value update is in progress or was interrupted
}

// Stats returns the map's layout and current fill.
func (m *Map) Stats() Stats {
	h := &m.hdr
	st := Stats{
		Path:             m.path,
		FormatVersion:    int(h.Version),
		FileSize:         int64(h.FileSize),
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
		EntrySpace:       int64(h.Segments) * int64(h.ChunksPerSegment) * int64(h.ChunkSize),
		ReadOnly:         m.readOnly,
	}
	if m.closed.Load() {
		return st
	}
	st.PerSegment = make([]SegmentStats, m.hdr.Segments)
	for i := range m.hdr.Segments {
		sh := m.segment(i).hdr
		ss := SegmentStats{
			Entries:     int(sh.count.Load()),
			Detached:    int(sh.detached.Load()),
			BytesUsed:   int64(sh.usedChunks.Load()) << m.chunkShift,
			Writing:     sh.version.Load()&1 != 0,
			RedoPending: sh.intent.Load() != 0,
		}
		if owner := sh.lock.Owner(); owner != 0 {
			ss.LockHolder = owner.PID()
			ss.HolderDead = !shm.Alive(owner)
		}
		st.PerSegment[i] = ss
		st.Len += ss.Entries
		st.Detached += ss.Detached
		st.BytesUsed += ss.BytesUsed
	}
	return st
}
