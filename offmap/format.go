package offmap

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
)

// The file format, version 3. Part of the format: do not change any of it
// without bumping formatVersion. docs/FORMAT.md describes it in full.
//
// All integers are little-endian. The file is:
//
//	[0, 4096)                  header page (below)
//	[SegHeadersOff, +256*S)    segment headers, 256 bytes each (segmentHeader)
//	[SegmentsOff, +Stride*S)   initial segment bodies, Stride bytes each:
//	    [0, 8*Slots)             the first slot table (slot bits below)
//	    [BitmapOff, ...)         extent 0's free-chunk bitmap, 1 bit per chunk
//	    [ScratchOff, ...)        redo record: uint64 value length, value bytes
//	    [AreaOff, +Chunk*Chunks) extent 0: entry space in chunks of ChunkSize
//	[FileSize, AllocEnd)       growth: larger slot tables and more extents,
//	                           claimed by any process as its segments fill
//
// Header page:
//
//	off  size  field
//	  0     8  magic "OFFMAP\x00\x00"
//	  8     4  format version (3)
//	 12     4  header size (4096)
//	 16     8  initial file size (a multiple of 64 KiB; growth starts here)
//	 24     8  hash seed (xxhash64 seed for keys)
//	 32     8  Entries (the room it was created with; it grows past them)
//	 40     4  AverageKeySize        44  4  AverageValueSize
//	 48     4  MaxKeySize            52  4  MaxValueSize
//	 56     4  segments              60  4  chunk size (power of two >= 8)
//	 64     4  slots per segment, initially
//	 68     4  max entries per segment, initially
//	 72     8  chunks of extent 0 (per segment)
//	 80     8  SegHeadersOff         88  8  SegmentsOff
//	 96     8  segment Stride       104  8  BitmapOff (in a segment)
//	112     8  ScratchOff (in a segment)    120  8  AreaOff (in a segment)
//	128     8  creation time, Unix nanoseconds
//	136     8  MaxFileSize: the file never grows past it
//	144     4  entry flags: bit 0, entries carry a checksum; bit 1, entries
//	           carry an expiry time (below); bit 2, the map evicts
//	           (evict.go); bit 3, freed slot tables are reused (free.go);
//	           a reader refuses a file with a flag it does not know
//	148     4  reserved, zero
//	152     8  TTL: entries' default time to live in nanoseconds, 0 = none
//	160     8  EvictOff: the eviction area's offset in a segment (bit 2)
//	168     4  EvictCap: the entries a segment holds at most (bit 2)
//	172    76  reserved, zero
//	248     8  checksum: xxhash64 of bytes [0, 248)
//	256     8  AllocEnd: end of the space claimed so far (CAS by growers)
//	264     8  slot tables grown (count, informational)
//	272     8  extents added (count, informational)
//	280     8  free-list changes (count; bit 3 only, else zero)
//	288     8  growth steps that reused freed space (count, informational)
//	296    24  reserved, zero
//	320     8  lock takeovers: segment locks taken from a dead holder
//	328     8  repairs: segments repaired after a dead holder or damage
//	336     8  expired entries removed (by writers and Sweep)
//	344    40  reserved, zero
//	384  1024  free words: 128 regions of the growth area no segment
//	           names, for growth to reuse (bit 3 only, else zero; free.go)
//	1408 2688  reserved, zero
//
// Bytes [0, 256) never change after creation; the growth words at 256 and
// the free words are changed atomically by every process that grows the
// map, the event counters at 320 (counterWords) by every process that has
// such an event.
//
// The event counters need no new format version: they are outside the
// checksum, in bytes that files made before them hold as zero (a count of
// no events), and nothing in a mapping's use reads them. A build that
// predates them reports them, when not zero, as reserved bytes in Check,
// and its Recover clears them: the counts start again from zero, nothing
// else changes.
const (
	formatVersion = 3
	// pidTokenVersion is version 3 but for what a lock word's token
	// means: a pid and a start time, which no process can judge across
	// pid namespaces, uids or a hidden /proc (internal/shm, Witness).
	// Open rewrites such a file as version 3 in place when no other
	// process has it open; see upgradeInPlace.
	pidTokenVersion   = 2
	magic             = "OFFMAP\x00\x00"
	checksumOff       = 248
	headerSize        = 4096
	headerReservedOff = 172 // [148, 152), [172, 248), [296, 320), [344, 384) and [1408, 4096) are reserved, zero
	growthWordsOff    = 256
	growthWordsEnd    = 296
	freeChangesOff    = 280 // the last two growth words, flag 3's
	counterWordsOff   = 320 // its own cache line: growers' CAS on AllocEnd never share it
	counterWordsEnd   = 344
	freeWordsOff      = 384 // free.go
	freeWordCount     = 128
	freeWordsEnd      = freeWordsOff + 8*freeWordCount
	segmentHeaderSize = 256
	entryHeaderSize   = 8
	// fileAlign is the granule of the starting size and of MaxFileSize: a
	// multiple of every page size in use (4, 16 and 64 KiB), so that the
	// first mapping ends on a page boundary. Growth claims are 64-byte
	// granular; a process maps the file up to the page that holds its end.
	fileAlign = 64 << 10
)

type header struct {
	Version          uint32
	HeaderSize       uint32
	FileSize         uint64 // initial size; growth lies past it
	Seed             uint64
	Entries          uint64
	AvgKey           uint32
	AvgValue         uint32
	MaxKey           uint32
	MaxValue         uint32
	Segments         uint32
	ChunkSize        uint32
	SlotsPerSegment  uint32
	MaxPerSegment    uint32
	ChunksPerSegment uint64 // of extent 0
	SegHeadersOff    uint64
	SegmentsOff      uint64
	SegmentStride    uint64
	BitmapOff        uint64
	ScratchOff       uint64
	AreaOff          uint64
	Created          int64
	MaxFileSize      uint64
	EntryFlags       uint32
	TTL              int64
	EvictOff         uint64 // in a segment's initial body; 0 unless flagEvict
	EvictCap         uint32 // entries per segment at most; 0 unless flagEvict
}

// Entry flags (header offset 144).
const (
	flagChecksums = 1 << 0 // entries' trailers hold a checksum
	flagExpiry    = 1 << 1 // entries' trailers hold an expiry time
	flagEvict     = 1 << 2 // the map evicts; slot bits 52-53 count accesses
	flagReuse     = 1 << 3 // freed slot tables are reused (free.go); never with flagEvict
	knownFlags    = flagChecksums | flagExpiry | flagEvict | flagReuse
)

// trailer is the size of the bytes after an entry's value: 8 for its
// checksum, then 8 for its expiry time, each where the flags say.
func (h *header) trailer() int {
	n := 0
	if h.EntryFlags&flagChecksums != 0 {
		n += 8
	}
	if h.EntryFlags&flagExpiry != 0 {
		n += 8
	}
	return n
}

func (h *header) encode() []byte {
	b := make([]byte, headerSize)
	le := binary.LittleEndian
	copy(b, magic)
	le.PutUint32(b[8:], h.Version)
	le.PutUint32(b[12:], h.HeaderSize)
	le.PutUint64(b[16:], h.FileSize)
	le.PutUint64(b[24:], h.Seed)
	le.PutUint64(b[32:], h.Entries)
	le.PutUint32(b[40:], h.AvgKey)
	le.PutUint32(b[44:], h.AvgValue)
	le.PutUint32(b[48:], h.MaxKey)
	le.PutUint32(b[52:], h.MaxValue)
	le.PutUint32(b[56:], h.Segments)
	le.PutUint32(b[60:], h.ChunkSize)
	le.PutUint32(b[64:], h.SlotsPerSegment)
	le.PutUint32(b[68:], h.MaxPerSegment)
	le.PutUint64(b[72:], h.ChunksPerSegment)
	le.PutUint64(b[80:], h.SegHeadersOff)
	le.PutUint64(b[88:], h.SegmentsOff)
	le.PutUint64(b[96:], h.SegmentStride)
	le.PutUint64(b[104:], h.BitmapOff)
	le.PutUint64(b[112:], h.ScratchOff)
	le.PutUint64(b[120:], h.AreaOff)
	le.PutUint64(b[128:], uint64(h.Created))
	le.PutUint64(b[136:], h.MaxFileSize)
	le.PutUint32(b[144:], h.EntryFlags)
	le.PutUint64(b[152:], uint64(h.TTL))
	le.PutUint64(b[160:], h.EvictOff)
	le.PutUint32(b[168:], h.EvictCap)
	le.PutUint64(b[checksumOff:], xxhash.Sum64(b[:checksumOff]))
	le.PutUint64(b[growthWordsOff:], h.FileSize) // AllocEnd: nothing claimed yet
	return b
}

// decodeHeader parses and validates the header page of a file of
// fileSize bytes. b holds the file's first min(fileSize, 4096) bytes.
// Each failure wraps its own sentinel: ErrEmptyFile, ErrNotMap,
// ErrTruncated, ErrVersion or ErrCorrupt. A file of format version 1 is
// ErrVersion with a pointer to Upgrade; one of pidTokenVersion is
// returned with that version for the caller to upgrade or refuse.
func decodeHeader(b []byte, fileSize int64) (*header, error) {
	if err := shm.CheckHeader(b, fileSize, magic, pidTokenVersion, formatVersion, headerSize, checksumOff); err != nil {
		if len(b) >= 12 && string(b[:8]) == magic && binary.LittleEndian.Uint32(b[8:]) == 1 {
			return nil, fmt.Errorf("%w: format version 1, from before maps could grow; 'offmap upgrade FILE' (or offmap.Upgrade) rewrites it as version %d", ErrVersion, formatVersion)
		}
		return nil, err
	}
	le := binary.LittleEndian
	h := &header{Version: le.Uint32(b[8:])}
	h.HeaderSize = le.Uint32(b[12:])
	h.FileSize = le.Uint64(b[16:])
	h.Seed = le.Uint64(b[24:])
	h.Entries = le.Uint64(b[32:])
	h.AvgKey = le.Uint32(b[40:])
	h.AvgValue = le.Uint32(b[44:])
	h.MaxKey = le.Uint32(b[48:])
	h.MaxValue = le.Uint32(b[52:])
	h.Segments = le.Uint32(b[56:])
	h.ChunkSize = le.Uint32(b[60:])
	h.SlotsPerSegment = le.Uint32(b[64:])
	h.MaxPerSegment = le.Uint32(b[68:])
	h.ChunksPerSegment = le.Uint64(b[72:])
	h.SegHeadersOff = le.Uint64(b[80:])
	h.SegmentsOff = le.Uint64(b[88:])
	h.SegmentStride = le.Uint64(b[96:])
	h.BitmapOff = le.Uint64(b[104:])
	h.ScratchOff = le.Uint64(b[112:])
	h.AreaOff = le.Uint64(b[120:])
	h.Created = int64(le.Uint64(b[128:]))
	h.MaxFileSize = le.Uint64(b[136:])
	h.EntryFlags = le.Uint32(b[144:])
	h.TTL = int64(le.Uint64(b[152:]))
	h.EvictOff = le.Uint64(b[160:])
	h.EvictCap = le.Uint32(b[168:])
	if h.EntryFlags&^knownFlags != 0 {
		return nil, fmt.Errorf("%w: the file's entries use features this version does not know (flags %#x)", ErrVersion, h.EntryFlags)
	}
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if uint64(fileSize) < h.FileSize {
		return nil, fmt.Errorf("%w: %d bytes, the header says %d", ErrTruncated, fileSize, h.FileSize)
	}
	return h, nil
}

// validate checks that the geometry is self-consistent: every region lies
// inside the file, regions do not overlap, and every word used atomically
// is aligned. After it, any offset computed from the header is in bounds.
func (h *header) validate() error {
	mul := func(a, b uint64) (uint64, bool) {
		hi, lo := bits.Mul64(a, b)
		return lo, hi == 0
	}
	switch {
	case h.HeaderSize != headerSize:
		return fmt.Errorf("header size %d", h.HeaderSize)
	case h.TTL < 0 || h.TTL != 0 && h.EntryFlags&flagExpiry == 0:
		return fmt.Errorf("time to live %d with entry flags %#x", h.TTL, h.EntryFlags)
	case h.EntryFlags&(flagEvict|flagReuse) == flagEvict|flagReuse:
		// An evicting map's readers write into slots: no table is reused.
		return fmt.Errorf("entry flags %#x: an evicting map that reuses freed tables", h.EntryFlags)
	case h.FileSize > maxFileSize || h.FileSize%fileAlign != 0:
		return fmt.Errorf("file size %d", h.FileSize)
	case h.MaxFileSize < h.FileSize || h.MaxFileSize > maxFileSize || h.MaxFileSize%fileAlign != 0:
		return fmt.Errorf("maximum file size %d for a file of %d", h.MaxFileSize, h.FileSize)
	case h.Segments == 0 || h.Segments > maxSegments:
		return fmt.Errorf("segments %d", h.Segments)
	case h.ChunkSize < 8 || h.ChunkSize > 4096 || h.ChunkSize&(h.ChunkSize-1) != 0:
		return fmt.Errorf("chunk size %d", h.ChunkSize)
	case h.SlotsPerSegment < 2 || h.SlotsPerSegment > maxSlotsPerSeg:
		return fmt.Errorf("slots per segment %d", h.SlotsPerSegment)
	case h.MaxPerSegment == 0 || h.MaxPerSegment >= h.SlotsPerSegment:
		return fmt.Errorf("max entries per segment %d for %d slots", h.MaxPerSegment, h.SlotsPerSegment)
	case h.ChunksPerSegment == 0 || h.ChunksPerSegment > maxExtent0Chunks:
		return fmt.Errorf("chunks per segment %d", h.ChunksPerSegment)
	case h.MaxKey == 0 || h.MaxKey > maxKeyLimit || h.MaxValue > maxValueLimit:
		return fmt.Errorf("max key %d, max value %d", h.MaxKey, h.MaxValue)
	case h.AvgKey > h.MaxKey || h.AvgValue > h.MaxValue:
		return fmt.Errorf("averages %d/%d above maxima %d/%d", h.AvgKey, h.AvgValue, h.MaxKey, h.MaxValue)
	case h.SegHeadersOff < headerSize || h.SegHeadersOff%64 != 0:
		return fmt.Errorf("segment headers at %d", h.SegHeadersOff)
	case h.SegmentsOff%64 != 0 || h.SegmentStride%64 != 0 || h.SegmentStride == 0:
		return fmt.Errorf("segments at %d, stride %d", h.SegmentsOff, h.SegmentStride)
	case h.BitmapOff%8 != 0 || h.ScratchOff%8 != 0 || h.AreaOff%8 != 0:
		return fmt.Errorf("unaligned segment regions %d/%d/%d", h.BitmapOff, h.ScratchOff, h.AreaOff)
	}
	if h.SegHeadersOff+uint64(h.Segments)*segmentHeaderSize > h.SegmentsOff {
		return fmt.Errorf("segment headers overlap segments")
	}
	if uint64(h.SlotsPerSegment)*8 > h.BitmapOff ||
		h.BitmapOff+(h.ChunksPerSegment+63)/64*8 > h.ScratchOff ||
		h.ScratchOff+8+uint64(shm.Pad8(int(h.MaxValue))) > h.AreaOff {
		return fmt.Errorf("segment regions overlap")
	}
	area, ok := mul(h.ChunksPerSegment, uint64(h.ChunkSize))
	if !ok || h.AreaOff+area > h.SegmentStride {
		return fmt.Errorf("entry space of %d chunks does not fit a stride of %d", h.ChunksPerSegment, h.SegmentStride)
	}
	if h.EntryFlags&flagEvict == 0 {
		if h.EvictOff != 0 || h.EvictCap != 0 {
			return fmt.Errorf("eviction area %d/%d in a map that does not evict", h.EvictOff, h.EvictCap)
		}
	} else if h.EvictCap == 0 || h.EvictCap > h.MaxPerSegment || h.EvictOff%64 != 0 ||
		h.EvictOff < h.AreaOff+area || h.EvictOff > h.SegmentStride ||
		uint64(evictAreaBytes(int(h.EvictCap))) > h.SegmentStride-h.EvictOff {
		return fmt.Errorf("eviction area at %d for %d entries, in a stride of %d", h.EvictOff, h.EvictCap, h.SegmentStride)
	}
	if uint64(entryBytes(int(h.MaxKey), int(h.MaxValue), h.trailer())) > area {
		return fmt.Errorf("largest entry does not fit a segment")
	}
	all, ok := mul(uint64(h.Segments), h.SegmentStride)
	if !ok || h.SegmentsOff+all > h.FileSize || h.SegmentsOff+all+fileAlign <= h.FileSize {
		return fmt.Errorf("segments end at %d, file size %d", h.SegmentsOff+all, h.FileSize)
	}
	return nil
}

// growthWords are the header words growers change, at growthWordsOff.
type growthWords struct {
	allocEnd     atomic.Uint64 // end of the claimed space: next claim starts here
	tablesGrown  atomic.Uint64
	extentsAdded atomic.Uint64
	freeChanges  atomic.Uint64 // takes from and puts to the free words (free.go)
	reused       atomic.Uint64 // growth steps that took freed space
}

// counterWords count events of every process that has the map open, at
// counterWordsOff; each is only ever incremented atomically, so a reader
// (Stats) never waits. The counts are monotonic for the file's life;
// offmap copy and upgrade start them again from zero in the new file.
type counterWords struct {
	lockTakeovers  atomic.Uint64 // segment locks taken over from a dead holder
	repairs        atomic.Uint64 // segments repaired after a dead holder or damage
	expiredRemoved atomic.Uint64 // expired entries deleted by writers and Sweep
}

// segmentHeader is the shared state of one segment, 256 bytes, in the
// segment header array. Part of the format.
//
//	off  field
//	  0  lock        shm.Mutex (16 bytes): owner token, futex word, sleepers
//	 16  version     seqlock counter; odd while a writer changes the segment
//	 24  table       the slot table: its offset in the file / 64 in bits
//	                 24-63, its number of slots (2 to 2^20) in bits 0-23
//	 32  count       live entries
//	 40  detached    entries deleted while value handles pinned them
//	 48  usedChunks  chunks taken by live and detached entries
//	 56  intent      redo record: 0, or 1 + the chunk of the entry whose
//	                 value is being rewritten in place from the scratch area;
//	                 with bit 63 set, 1 + the chunk of the segment's
//	                 transaction record (txn.go)
//	 64  allocHint   chunk where the next allocation search starts
//	 72  tx          0, or the multi-key transaction the segment takes part
//	                 in: commit segment, id, committed bit (txn.go)
//	 80  extents     22 words: offset in the file of extent k (k = 1..22),
//	                 or 0 while the segment has no extent k
//
// Readers need only the first cache line (version and table). count,
// detached, usedChunks and the bitmaps are derived from the slots; a
// repair recomputes them.
type segmentHeader struct {
	lock       shm.Mutex
	version    atomic.Uint64
	table      atomic.Uint64
	count      atomic.Uint64
	detached   atomic.Uint64
	usedChunks atomic.Uint64
	intent     atomic.Uint64
	allocHint  atomic.Uint64
	tx         atomic.Uint64
	extents    [maxExtents]atomic.Uint64
}

const (
	tableSlotBits = 24
	maxSlotsLimit = 1 << slotFracBits // slots a segment's table may grow to
)

// tableWord packs a slot table's place and size.
func tableWord(off, slots int) uint64 { return uint64(off)/64<<tableSlotBits | uint64(slots) }

func tableAt(w uint64) (off, slots int) {
	return int(w>>tableSlotBits) * 64, int(w & (1<<tableSlotBits - 1))
}

// tableLimit is how many entries a slot table of n slots takes before
// the segment moves to a table twice as large: 85 %, where linear probing
// still finds a key in a few probes.
func tableLimit(n int) int { return n * 85 / 100 }

// Extents. A segment's entry space is extent 0, in its initial body, and
// extents 1 to 22 added as it fills. Chunks are numbered across extents:
// with B the smallest power of two >= ChunksPerSegment, extent 0 holds
// chunks [0, ChunksPerSegment) and extent k >= 1 holds the 2^(B+k-1)
// chunks [2^(B+k-1), 2^(B+k)), so each extent doubles the segment's space
// and a chunk's extent is a bit length away. An extent in the growth area
// is its free-chunk bitmap, padded to 64 bytes, then its entry space.
const maxExtents = 22

// maxExtent0Chunks keeps B+1 <= 32: extent 1's chunks must be numbered
// in 32 bits.
const maxExtent0Chunks = 1 << 30

// extentChunks is the number of chunks in extent k >= 1.
func (m *Map) extentChunks(k int) int { return 1 << (m.extBits + k - 1) }

// extentBitmapBytes is the size of extent k's bitmap, padded to 64.
func (m *Map) extentBitmapBytes(k int) int { return shm.Pad((m.extentChunks(k)+63)/64*8, 64) }

// extentBytes is the size of extent k in the file.
func (m *Map) extentBytes(k int) int {
	return m.extentBitmapBytes(k) + m.extentChunks(k)<<m.chunkShift
}

// maxExtent is the last extent a segment may have: chunk numbers must fit
// in 32 bits.
func (m *Map) maxExtent() int { return min(maxExtents, 32-m.extBits) }

// Slot bits. A slot is 0 when empty. Part of the format.
//
//	bits  0-31  chunk of the entry in the segment's numbering (above)
//	bits 32-51  hash fraction: 20 bits of the key's hash; the key's home
//	            slot in a table of n slots is fraction*n >> 20, so a table
//	            can grow without reading a key
//	bits 52-60  tag: 9 more bits of the key's hash; in a map that evicts
//	            (flag 2), bits 52-53 are instead the entry's access count,
//	            0 to 3, which readers raise (evict.go), and the tag is 7 bits
//	bit     61  pinned: value handles may point at the value; its size is fixed
//	bit     62  detached: deleted while pinned; lookups skip it, space kept
//	bit     63  used
const (
	slotChunkMask = 1<<32 - 1
	slotFracShift = 32
	slotFracBits  = 20
	slotFracMask  = (1<<slotFracBits - 1) << slotFracShift
	slotTagShift  = 52
	slotTagMask   = (1<<9 - 1) << slotTagShift
	slotFreqShift = slotTagShift
	slotFreqMask  = 3 << slotFreqShift // access count, in a map that evicts
	slotFreqOne   = 1 << slotFreqShift
	slotPinned    = 1 << 61
	slotDetached  = 1 << 62
	slotUsed      = 1 << 63
	// slotMatch selects the bits a lookup compares: a live slot with the
	// key's hash fraction and tag (Map.matchBits: less the access count in
	// a map that evicts).
	slotMatch = slotUsed | slotDetached | slotFracMask | slotTagMask
)

func slotChunk(w uint64) uint32 { return uint32(w & slotChunkMask) }

// homeIn is the home slot of slot word w in a table of n slots.
func homeIn(w uint64, n int) uint32 {
	return uint32((w & slotFracMask) >> slotFracShift * uint64(n) >> slotFracBits)
}

// Entry layout, at the chunk's place in its extent:
//
//	off  size           field
//	  0  4              key length
//	  4  4              value length
//	  8  pad8(keyLen)   key, zero padded
//	  .  pad8(valueLen) value, 8-byte aligned, zero padded
//	  .  8              with flag 0 (checksums) only: uint32 checksum,
//	                    uint32 zero
//	  .  8              with flag 1 (expiry) only: int64 expiry time, Unix
//	                    nanoseconds; 0 = never
//
// The checksum is the low 32 bits of xxhash64 (seed 0) of the key's bytes
// followed by the value's. Entries that value handles pin carry none that
// holds: handles change their values without the lock.
//
// entryBytes is the size of an entry: header, key and value, each padded
// to 8 bytes so that values are 8-byte aligned for atomic handles, and
// the trailer.
func entryBytes(keyLen, valLen, trailer int) int {
	return entryHeaderSize + shm.Pad8(keyLen) + shm.Pad8(valLen) + trailer
}

// entrySum is an entry's checksum.
func entrySum(key, value []byte) uint32 {
	var d xxhash.Digest
	d.Reset()
	d.Write(key)
	d.Write(value)
	return uint32(d.Sum64())
}

// The format fixes these sizes; the compiler checks the structs agree.
var (
	_ [segmentHeaderSize - unsafe.Sizeof(segmentHeader{})]byte
	_ [unsafe.Sizeof(segmentHeader{}) - segmentHeaderSize]byte
	_ [growthWordsEnd - growthWordsOff - unsafe.Sizeof(growthWords{})]byte
	_ [counterWordsEnd - counterWordsOff - unsafe.Sizeof(counterWords{})]byte
	_ [unsafe.Sizeof(counterWords{}) - (counterWordsEnd - counterWordsOff)]byte
	_ [counterWordsOff - growthWordsEnd]byte // after the growth words
	_ [unsafe.Offsetof(growthWords{}.freeChanges) - (freeChangesOff - growthWordsOff)]byte
	_ [(freeChangesOff - growthWordsOff) - unsafe.Offsetof(growthWords{}.freeChanges)]byte
	_ [growthWordsEnd - freeChangesOff - 16]byte // the free-list changes and reuses end the growth words
	_ [16 - (growthWordsEnd - freeChangesOff)]byte
)

// outsideReserved returns the reserved ranges of the header page outside
// the checksum: around the event counters and the free words. In a map
// that does not reuse, the free words and the two growth words that count
// their changes and the reuses (never written there) are reserved too.
func (m *Map) outsideReserved() [][2]int {
	if m.reuse {
		return [][2]int{{growthWordsEnd, counterWordsOff}, {counterWordsEnd, freeWordsOff}, {freeWordsEnd, headerSize}}
	}
	return [][2]int{{freeChangesOff, counterWordsOff}, {counterWordsEnd, headerSize}}
}
