package offmap

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
)

// The file format, version 1. Part of the format: do not change any of it
// without bumping formatVersion. docs/FORMAT.md describes it in full.
//
// All integers are little-endian. The file is:
//
//	[0, 4096)                 header page (below)
//	[SegHeadersOff, +64*S)    segment headers, 64 bytes each (segmentHeader)
//	[SegmentsOff, +Stride*S)  segment data, Stride bytes each:
//	    [0, 8*Slots)            hash slots, one uint64 each (slot bits below)
//	    [BitmapOff, ...)        free-chunk bitmap, one bit per chunk, 1 = used
//	    [ScratchOff, ...)       redo record: uint64 value length, value bytes
//	    [AreaOff, +Chunk*Chunks) entry space in chunks of ChunkSize bytes
//
// Header page:
//
//	off  size  field
//	  0     8  magic "OFFMAP\x00\x00"
//	  8     4  format version (1)
//	 12     4  header size (4096)
//	 16     8  file size
//	 24     8  hash seed (xxhash64 seed for keys)
//	 32     8  Entries (declared capacity)
//	 40     4  AverageKeySize        44  4  AverageValueSize
//	 48     4  MaxKeySize            52  4  MaxValueSize
//	 56     4  segments              60  4  chunk size (power of two >= 8)
//	 64     4  slots per segment     68  4  max entries per segment
//	 72     8  chunks per segment
//	 80     8  SegHeadersOff         88  8  SegmentsOff
//	 96     8  segment Stride       104  8  BitmapOff (in a segment)
//	112     8  ScratchOff (in a segment)    120  8  AreaOff (in a segment)
//	128     8  creation time, Unix nanoseconds
//	136   112  reserved, zero
//	248     8  checksum: xxhash64 of bytes [0, 248)
//	256  3840  reserved, zero
const (
	formatVersion     = 1
	magic             = "OFFMAP\x00\x00"
	checksumOff       = 248
	headerSize        = 4096
	headerReservedOff = 136 // [136, 248) and [256, 4096) are reserved, zero
	segmentHeaderSize = 64
	entryHeaderSize   = 8
)

type header struct {
	Version          uint32
	HeaderSize       uint32
	FileSize         uint64
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
	ChunksPerSegment uint64
	SegHeadersOff    uint64
	SegmentsOff      uint64
	SegmentStride    uint64
	BitmapOff        uint64
	ScratchOff       uint64
	AreaOff          uint64
	Created          int64
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
	le.PutUint64(b[checksumOff:], xxhash.Sum64(b[:checksumOff]))
	return b
}

// decodeHeader parses and validates the header page of a file of
// fileSize bytes. b holds the file's first min(fileSize, 4096) bytes.
// Each failure wraps its own sentinel: ErrEmptyFile, ErrNotMap,
// ErrTruncated, ErrVersion or ErrCorrupt.
func decodeHeader(b []byte, fileSize int64) (*header, error) {
	if err := shm.CheckHeader(b, fileSize, magic, formatVersion, headerSize, checksumOff); err != nil {
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
	case h.FileSize > maxFileSize:
		return fmt.Errorf("file size %d", h.FileSize)
	case h.Segments == 0 || h.Segments > maxSegments:
		return fmt.Errorf("segments %d", h.Segments)
	case h.ChunkSize < 8 || h.ChunkSize > 4096 || h.ChunkSize&(h.ChunkSize-1) != 0:
		return fmt.Errorf("chunk size %d", h.ChunkSize)
	case h.SlotsPerSegment < 2 || h.SlotsPerSegment > maxSlotsPerSeg:
		return fmt.Errorf("slots per segment %d", h.SlotsPerSegment)
	case h.MaxPerSegment == 0 || h.MaxPerSegment >= h.SlotsPerSegment:
		return fmt.Errorf("max entries per segment %d for %d slots", h.MaxPerSegment, h.SlotsPerSegment)
	case h.ChunksPerSegment == 0 || h.ChunksPerSegment >= 1<<32:
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
	if uint64(entryBytes(int(h.MaxKey), int(h.MaxValue))) > area {
		return fmt.Errorf("largest entry does not fit a segment")
	}
	all, ok := mul(uint64(h.Segments), h.SegmentStride)
	if !ok || h.SegmentsOff+all != h.FileSize {
		return fmt.Errorf("segments end at %d, file size %d", h.SegmentsOff+all, h.FileSize)
	}
	return nil
}

// segmentHeader is the shared state of one segment, 64 bytes, in the
// segment header array. Part of the format.
//
//	off  field
//	  0  lock        shm.Mutex (16 bytes): owner token, futex word, sleepers
//	 16  version     seqlock counter; odd while a writer changes the segment
//	 24  count       live entries
//	 32  detached    entries deleted while value handles pinned them
//	 40  usedChunks  chunks taken by live and detached entries
//	 48  intent      redo record: 0, or 1 + the chunk of the entry whose
//	                 value is being rewritten in place from the scratch area
//	 56  allocHint   chunk where the next allocation search starts
//
// count, detached, usedChunks and the bitmap are derived from the slots;
// a repair recomputes them.
// versionOff is the offset of segmentHeader.version.
const versionOff = 16

type segmentHeader struct {
	lock       shm.Mutex
	version    atomic.Uint64
	count      atomic.Uint64
	detached   atomic.Uint64
	usedChunks atomic.Uint64
	intent     atomic.Uint64
	allocHint  atomic.Uint64
}

// Slot bits. A slot is 0 when empty. Part of the format.
//
//	bits  0-31  chunk of the entry in the segment's entry space
//	bits 32-47  home: the slot the key hashes to (linear probing start)
//	bits 48-60  tag: 13 more bits of the key's hash
//	bit     61  pinned: value handles may point at the value; its size is fixed
//	bit     62  detached: deleted while pinned; lookups skip it, space kept
//	bit     63  used
const (
	slotChunkMask = 1<<32 - 1
	slotHomeShift = 32
	slotHomeMask  = (1<<16 - 1) << slotHomeShift
	slotTagShift  = 48
	slotTagMask   = (1<<13 - 1) << slotTagShift
	slotPinned    = 1 << 61
	slotDetached  = 1 << 62
	slotUsed      = 1 << 63
	// slotMatch selects the bits a lookup compares: a live slot with the
	// key's home and tag.
	slotMatch = slotUsed | slotDetached | slotHomeMask | slotTagMask
)

func slotChunk(w uint64) uint32 { return uint32(w & slotChunkMask) }

// Entry layout, at chunk*ChunkSize in a segment's entry space:
//
//	off  size           field
//	  0  4              key length
//	  4  4              value length
//	  8  pad8(keyLen)   key, zero padded
//	  .  pad8(valueLen) value, 8-byte aligned, zero padded
//
// entryBytes is the size of an entry: header, key and value, each padded
// to 8 bytes so that values are 8-byte aligned for atomic handles.
func entryBytes(keyLen, valLen int) int {
	return entryHeaderSize + shm.Pad8(keyLen) + shm.Pad8(valLen)
}
