package offmap

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Options size a new map and say how to open an existing one. The zero
// Options create a small map that grows as it fills: room for 1024
// entries of 32-byte keys and 64-byte values to start, 16 segments, keys
// of up to 256 bytes and values of up to 4096 (a file of 384 KiB). The
// sizes are hints, which spare a map that will be large its first growth
// steps, except MaxKeySize and MaxValueSize, which are limits. When the
// file exists, zero sizes mean "take the file's"; a non-zero size that
// differs from the file's is an ErrOptionsMismatch.
type Options struct {
	// Entries is how many entries the map starts with room for; it grows
	// past them as it fills (up to MaxFileSize). Zero means 1024.
	Entries int
	// AverageKeySize and AverageValueSize, in bytes, size the starting
	// entry space and the chunks it is allocated in; entries larger than
	// these simply make it grow sooner. Zero means 32 and 64 (a set has
	// no values: its AverageValueSize must be zero).
	AverageKeySize   int
	AverageValueSize int
	// MaxKeySize and MaxValueSize bound single keys and values for the
	// map's life (offmap copy makes a map of other bounds). Zero picks
	// max(8 x average, 256), or 4096 for values when AverageValueSize is
	// zero too; keys are limited to 65535 bytes. Each segment sets aside
	// about twice MaxValueSize (a scratch copy and room for one largest
	// entry), so a large bound makes a larger file from the start. A
	// default average larger than a given bound is lowered to it.
	MaxKeySize   int
	MaxValueSize int
	// Segments is the number of independently locked parts. Zero picks
	// about one per 1024 entries, at least 16 (below 1024 entries, one
	// per 64). It is fixed at creation, and a segment holds at most about
	// 891,000 entries: a map that is to pass some 14 million entries
	// wants more segments (or a larger Entries) than the zero Options
	// give it.
	Segments int
	// MaxFileSize bounds the file as the map grows past Entries and the
	// average sizes: Put returns ErrFull only there (or when the disk is
	// full). Every process reserves this much address space for the map
	// while it has it open (it costs no memory), so that value handles
	// never move; the process's address space bounds how many maps it can
	// have open at once, fewer under an address-space limit (ulimit -v),
	// where Open says so. Zero means 1024 times the starting size, at
	// least 1 GiB and at most 64 GiB (or 4 times the starting size, if
	// that is more): a map of the zero Options reserves 1 GiB, and the
	// 128 TiB of a Linux amd64 process hold over 100,000 of them (open
	// files, ulimit -n, and vm.max_map_count, 65,530 mappings by default
	// and two per map, bind first). Only at creation
	// ('offmap copy --max-file-size' rewrites a map with another).
	MaxFileSize int64
	// ChecksumEntries keeps a checksum in every entry (as Chronicle Map's
	// checksumEntries), which Check, Recover and offmap verify use to find
	// entries a power cut tore: such a write is reported, and dropped by
	// Recover, instead of being read back half old and half new. Every
	// read of a value (Get, AppendValue, Range, ViewKeys, and Update's and
	// UpdateKeys' old values) checks it too, and returns ErrCorrupt
	// rather than bytes it rejects (a torn write, or a damaged length
	// word), in read-only processes as well. Each Put and each read of a
	// value hashes key and value once more, and same-size updates of 8
	// bytes or less go through the crash-safe redo record instead of one
	// atomic store. Values that handles (AcquireInt64 and the others)
	// point into are not checked. Only at creation.
	ChecksumEntries bool
	// TTL is how long an entry lives after each write that stores its
	// value (Put, Update and the others; PutTTL gives its own). An expired
	// entry is never returned; its space is reclaimed when a writer meets
	// it and by Sweep, which any process may run. Zero: entries live until
	// deleted. Only at creation, like Expiring.
	TTL time.Duration
	// Evict makes the map a cache: it holds at most Entries entries and
	// its file at most MaxFileSize bytes, and a Put that needs room, in
	// any process, evicts entries unlikely to be used again (S3-FIFO,
	// docs/MAP.md) rather than returning ErrFull. Entries that value
	// handles point into are never evicted; expired ones go first. The
	// bound is kept per segment: each holds Entries/Segments at most,
	// rounded up (Stats.EvictBound is the sum).
	// Processes that open the map ReadOnly record no accesses. Only at
	// creation.
	Evict bool
	// Expiring lets entries expire (PutTTL, PutExpiring) in a map with no
	// TTL. Every entry then keeps an expiry time, and Get reads the clock
	// (about 20 ns) when it finds a key. Implied by TTL.
	Expiring bool

	// ReadOnly maps the file read-only. A file this process may not
	// write is opened read-only even without it. Writes return ErrReadOnly.
	ReadOnly bool
	// FileMode is the permission of a new file; zero means 0600 (as for
	// queue files: readable by the owner only; 0640 shares with a group).
	FileMode os.FileMode
	// LockTimeout bounds the wait for a segment lock held by a live
	// process (a dead holder is taken over within about a second
	// whatever this says). Zero means 30 s; negative means no limit.
	LockTimeout time.Duration

	// OpenDamaged opens a map whose growth records disagree with the
	// file, which Open otherwise refuses: a file shorter than the slot
	// tables and extents its segments name (ErrTruncated, as a file cut
	// short is), or those overlapping each other or past the claimed
	// space's end (ErrCorrupt). It is for Recover (offmap recover and
	// verify use it), which then drops what was lost and says what;
	// before Recover, operations on the segments concerned may fail.
	// A sound map opens as without it.
	OpenDamaged bool

	set bool // opened by OpenSet: keys only
}

const (
	maxKeyLimit      = 1<<16 - 1
	maxValueLimit    = 1 << 30
	maxSegments      = 1 << 16
	maxSlotsPerSeg   = maxSlotsLimit
	maxFileSize      = 1 << 46
	defaultMaxFloor  = 256
	defaultEntries   = 1024 // of a map created with zero Entries
	defaultKeySize   = 32   // of a map created with zero AverageKeySize
	defaultValueSize = 64   // of a map created with zero AverageValueSize
	defaultMaxValue  = 4096 // of a map created with zero AverageValueSize and MaxValueSize
	defaultLockWait  = 30 * time.Second
	targetPerSegment = 1024 // entries per segment in large maps
	minSmallSegment  = 64   // entries per segment in small maps
	smallMapSegments = 16
	maxLoadFactor    = 0.85 // of a segment's slots at its entry limit
	spreadSigmas     = 4.5  // headroom for uneven hashing, in std deviations
)

// defaultMaxFile is the largest default MaxFileSize, and minDefaultMaxFile
// the smallest: by default a map may grow to 1024 times its starting
// size, within these bounds (and to at least 4 times its starting size).
// Every open map holds its MaxFileSize of address space, so the default
// scales with the map: a small map reserves 1 GiB, so that one process
// can open 10,000 of them (TestTenThousandDefaultMaps), where 64 GiB
// each allowed 2,000.
// Variables so that tests under qemu-user, which keeps a descriptor per
// page of reserved address space, can lower them.
var (
	defaultMaxFile    int64 = 64 << 30
	minDefaultMaxFile int64 = 1 << 30
)

// defaultLimit is MaxFileSize's default for a map that starts at
// fileSize bytes.
func defaultLimit(fileSize int64) int64 {
	limit := min(max(1024*fileSize, minDefaultMaxFile), defaultMaxFile)
	return min(max(limit, 4*fileSize), maxFileSize)
}

func (o Options) lockTimeout() time.Duration {
	switch {
	case o.LockTimeout == 0:
		return defaultLockWait
	case o.LockTimeout < 0:
		return 0
	}
	return o.LockTimeout
}

func (o Options) fileMode() os.FileMode {
	if o.FileMode == 0 {
		return 0o600
	}
	return o.FileMode
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

// plan computes the layout of a new map file from the options, with the
// defaults of Options for the sizes they leave at zero.
func plan(o Options, seed uint64) (header, error) {
	var h header
	switch {
	case o.Entries < 0:
		return h, invalid("Entries must not be negative (got %d)", o.Entries)
	case o.AverageKeySize < 0:
		return h, invalid("AverageKeySize must not be negative (got %d)", o.AverageKeySize)
	case o.set && (o.AverageValueSize != 0 || o.MaxValueSize != 0):
		return h, invalid("a set has no values: AverageValueSize and MaxValueSize must be 0")
	case o.AverageValueSize < 0:
		return h, invalid("AverageValueSize must not be negative (got %d)", o.AverageValueSize)
	case o.MaxKeySize < 0 || o.MaxValueSize < 0 || o.Segments < 0 || o.MaxFileSize < 0:
		return h, invalid("sizes must not be negative")
	}
	if o.Entries == 0 {
		o.Entries = defaultEntries
	}
	if o.AverageKeySize == 0 {
		o.AverageKeySize = defaultKeySize
		if o.MaxKeySize > 0 {
			o.AverageKeySize = min(defaultKeySize, o.MaxKeySize)
		}
	}
	maxValue := o.MaxValueSize
	if !o.set && o.AverageValueSize == 0 {
		if maxValue == 0 {
			maxValue = defaultMaxValue
		}
		o.AverageValueSize = min(defaultValueSize, maxValue)
	}
	maxKey := o.MaxKeySize
	if maxKey == 0 {
		maxKey = min(max(8*o.AverageKeySize, defaultMaxFloor), maxKeyLimit)
	}
	if maxValue == 0 && !o.set {
		maxValue = min(max(8*o.AverageValueSize, defaultMaxFloor), maxValueLimit)
	}
	switch {
	case maxKey > maxKeyLimit:
		return h, invalid("MaxKeySize %d exceeds %d", maxKey, maxKeyLimit)
	case maxValue > maxValueLimit:
		return h, invalid("MaxValueSize %d exceeds %d", maxValue, maxValueLimit)
	case o.AverageKeySize > maxKey:
		return h, invalid("AverageKeySize %d exceeds MaxKeySize %d", o.AverageKeySize, maxKey)
	case o.AverageValueSize > maxValue:
		return h, invalid("AverageValueSize %d exceeds MaxValueSize %d", o.AverageValueSize, maxValue)
	}

	var flags uint32
	if o.ChecksumEntries {
		flags |= flagChecksums
	}
	switch {
	case o.TTL < 0:
		return h, invalid("TTL must not be negative (got %v)", o.TTL)
	case o.TTL > 0 || o.Expiring:
		flags |= flagExpiry
	}
	if o.Evict {
		flags |= flagEvict
	} else {
		flags |= flagReuse
	}
	trailer := (&header{EntryFlags: flags}).trailer()
	avgEntry := entryBytes(o.AverageKeySize, o.AverageValueSize, trailer)
	// Chunks of a power of two such that an average entry spans 4-8 of
	// them: small enough to waste little, large enough for a small bitmap.
	chunk := 8
	for chunk < 4096 && avgEntry >= 8*chunk {
		chunk *= 2
	}

	entries := int64(o.Entries)
	segments := o.Segments
	if segments == 0 {
		segments = 1
		for segments < maxSegments && entries/int64(2*segments) >= targetPerSegment {
			segments *= 2
		}
		if segments < smallMapSegments {
			segments = int(min(smallMapSegments, max(1, entries/minSmallSegment)))
		}
	}
	if segments > maxSegments {
		return h, invalid("Segments %d exceeds %d", segments, maxSegments)
	}
	perSeg := (entries + int64(segments) - 1) / int64(segments)
	maxPer := perSeg + int64(math.Ceil(spreadSigmas*math.Sqrt(float64(perSeg)))) + 2
	slots := int64(math.Ceil(float64(maxPer) / maxLoadFactor))
	if slots > maxSlotsPerSeg {
		return h, invalid("%d entries in %d segments need %d slots per segment (limit %d): use more segments",
			o.Entries, segments, slots, maxSlotsPerSeg)
	}
	avgChunks := int64((avgEntry + chunk - 1) / chunk)
	maxEntryChunks := int64((entryBytes(maxKey, maxValue, trailer) + chunk - 1) / chunk)
	chunks := maxPer*avgChunks + maxEntryChunks
	if chunks > maxExtent0Chunks {
		return h, invalid("segments too large: %d chunks (use more segments)", chunks)
	}

	bitmapOff := shm.Pad(slots*8, 64)
	scratchOff := shm.Pad(bitmapOff+(chunks+63)/64*8, 64)
	areaOff := shm.Pad(scratchOff+8+int64(shm.Pad8(maxValue)), 64)
	stride := shm.Pad(areaOff+chunks*int64(chunk), 64)
	var evictOff, evictCap int64
	if o.Evict {
		evictCap = perSeg
		evictOff = stride
		stride = shm.Pad(evictOff+int64(evictAreaBytes(int(evictCap))), 64)
	}
	segHeaders := int64(headerSize)
	segmentsOff := shm.Pad(segHeaders+int64(segments)*segmentHeaderSize, 64)
	if stride > maxFileSize/int64(segments) || segmentsOff+int64(segments)*stride > maxFileSize-fileAlign {
		return h, invalid("a map of %d entries of %d bytes needs more than %d bytes", o.Entries, avgEntry, int64(maxFileSize))
	}
	fileSize := shm.Pad(segmentsOff+int64(segments)*stride, fileAlign)
	limit := o.MaxFileSize
	switch {
	case limit == 0:
		limit = defaultLimit(fileSize)
	case limit < fileSize:
		return h, invalid("MaxFileSize %d is below the %d bytes the map starts with", o.MaxFileSize, fileSize)
	case limit > maxFileSize:
		return h, invalid("MaxFileSize %d exceeds %d", o.MaxFileSize, int64(maxFileSize))
	}
	limit = limit / fileAlign * fileAlign

	h = header{
		Version:          formatVersion,
		HeaderSize:       headerSize,
		FileSize:         uint64(fileSize),
		Seed:             seed,
		Entries:          uint64(o.Entries),
		AvgKey:           uint32(o.AverageKeySize),
		AvgValue:         uint32(o.AverageValueSize),
		MaxKey:           uint32(maxKey),
		MaxValue:         uint32(maxValue),
		Segments:         uint32(segments),
		ChunkSize:        uint32(chunk),
		SlotsPerSegment:  uint32(slots),
		MaxPerSegment:    uint32(maxPer),
		ChunksPerSegment: uint64(chunks),
		SegHeadersOff:    uint64(segHeaders),
		SegmentsOff:      uint64(segmentsOff),
		SegmentStride:    uint64(stride),
		BitmapOff:        uint64(bitmapOff),
		ScratchOff:       uint64(scratchOff),
		AreaOff:          uint64(areaOff),
		Created:          time.Now().UnixNano(),
		MaxFileSize:      uint64(limit),
		EntryFlags:       flags,
		TTL:              int64(o.TTL),
		EvictOff:         uint64(evictOff),
		EvictCap:         uint32(evictCap),
	}
	return h, nil
}

// checkAgainst reports options that conflict with an existing file.
func (o Options) checkAgainst(h *header) error {
	type pair struct {
		name      string
		opt, file int64
	}
	if o.ChecksumEntries && h.EntryFlags&flagChecksums == 0 {
		return fmt.Errorf("%w: ChecksumEntries is set in the options but the file's entries have no checksums", ErrOptionsMismatch)
	}
	if o.Evict && h.EntryFlags&flagEvict == 0 {
		return fmt.Errorf("%w: Evict is set in the options but the file's map does not evict", ErrOptionsMismatch)
	}
	if (o.Expiring || o.TTL != 0) && h.EntryFlags&flagExpiry == 0 {
		return fmt.Errorf("%w: the options let entries expire but the file's entries cannot", ErrOptionsMismatch)
	}
	if o.TTL != 0 && int64(o.TTL) != h.TTL {
		return fmt.Errorf("%w: TTL is %v in the options but %v in the file", ErrOptionsMismatch, o.TTL, time.Duration(h.TTL))
	}
	for _, p := range []pair{
		{"Entries", int64(o.Entries), int64(h.Entries)},
		{"AverageKeySize", int64(o.AverageKeySize), int64(h.AvgKey)},
		{"AverageValueSize", int64(o.AverageValueSize), int64(h.AvgValue)},
		{"MaxKeySize", int64(o.MaxKeySize), int64(h.MaxKey)},
		{"MaxValueSize", int64(o.MaxValueSize), int64(h.MaxValue)},
		{"Segments", int64(o.Segments), int64(h.Segments)},
		{"MaxFileSize", o.MaxFileSize / fileAlign * fileAlign, int64(h.MaxFileSize)},
	} {
		if p.opt != 0 && p.opt != p.file {
			return fmt.Errorf("%w: %s is %d in the options but %d in the file", ErrOptionsMismatch, p.name, p.opt, p.file)
		}
	}
	return nil
}
