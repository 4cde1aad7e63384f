package queue

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
)

// The file formats, version 2. Part of the format: do not change any of it
// without bumping formatVersion (queue.meta's) or cycleVersion. docs/QUEUE-FORMAT.md describes it in full,
// with the steps that change the shared words.
//
// All integers are little-endian; every word used atomically is aligned to
// its size.
//
// The metadata file, queue.meta (metaSize bytes):
//
//	off   size  field
//	  0      8  magic "OFFQUEUE"
//	  8      4  format version (2; 3 when flags are set)
//	 12      4  metadata file size (16384)
//	 16      4  roll cycle (1 daily, 2 hourly, 3 minutely, 4 secondly, 5 fast)
//	 20      4  index spacing (power of two)
//	 24      8  roll cycle length, nanoseconds
//	 32      8  epoch: start of cycle 0, Unix seconds
//	 40      8  maximum cycle file size
//	 48      8  creation time, Unix nanoseconds
//	 56      4  flags (version 3; zero in version 2):
//	              bit 0  messages carry checksums (Options.ChecksumMessages)
//	 60    188  reserved, zero
//	248      8  checksum: xxhash64 of bytes [0, 248)
//	256     16  lock (internal/shm Mutex): leases and named tailers
//	320      8  latest cycle + 1 (0: no cycle file yet)
//	384      4  doorbell: futex word, odd while a wake-up is pending
//	388      4  sleepers: processes watching the doorbell, and BlockThread tailers asleep on it
//	448      8  dead-writer slots skipped: busy slots a tailer marked
//	            skipped because their writer had died (all processes)
//	456     56  reserved, zero (event counters to come)
//	1024  4096  writer leases, 256 x {token uint64, generation uint64}
//	5120  8192  named tailers, 128 x 64 bytes:
//	              0  8  name length (0: free slot)
//	              8  8  acknowledged index + 1 (0: none yet)
//	             16 48  name
//
// A cycle file, one per roll cycle, named after the cycle's start time:
//
//	off   size  field
//	  0      8  magic "OFFQCYCL"
//	  8      4  cycle format version (1)
//	 12      4  header size (4096)
//	 16      8  cycle number
//	 24      8  previous cycle + 1 (0: the queue's first cycle)
//	 32      4  index spacing      36  4  entries per index array (4096)
//	 40      4  index arrays (480) 44  4  reserved, zero
//	 48      8  creation time, Unix nanoseconds
//	 56     64  reserved, zero
//	120      8  checksum: xxhash64 of bytes [0, 120)
//	128      8  write hint: sequence << 32 | offset / 8 of a slot boundary
//	            at or before the first free slot
//	192      8  next cycle + 1 (0: not rolled yet)
//	256   3840  level-1 index: 480 offsets of index arrays (0: none yet)
//	4096     -  slots, each an 8-byte header and a payload padded to 8
//
// Slot header (uint64):
//
//	bits  0-31  payload length
//	bits 32-39  writer lease (index into the metadata file's lease table)
//	bits 40-59  lease generation (never 0 in a message's header)
//	bit  60     metadata: an index array or the padding a cycle starts
//	            with, not a message (takes no sequence)
//	bit  61     skipped: abandoned by a dead writer (takes a sequence)
//	bit  62     end of cycle: the next message is in the next cycle file
//	bit  63     not complete: the writer is still writing the payload
//
// In a queue whose flags say messages carry checksums, a message's
// payload (the length in its header counts it) starts with its checksum,
// messageSum of the rest (the bytes appended) and its index; index
// arrays, padding and skipped slots carry none.
//
// A header of 0 is a free slot (a metadata header has bit 60 set, so it
// is never 0 either). The first slot of a cycle is padding: metadata of 1
// to 63 cache lines in all, drawn at random (see startPad). An index array is a metadata slot whose
// payload is indexArrayBytes+56 bytes (a 64-byte multiple with its header);
// its first indexArrayBytes hold indexEntries offsets:
// entry i of array j is the offset of message (j*indexEntries+i)*spacing
// (0: not recorded).
const (
	// formatVersion is queue.meta's, and the queue's: version 2 changed
	// what a token in the lock word and the writer leases means (a witness
	// byte instead of a pid and start time; internal/shm, Witness).
	// Opening a version 1 queue for writing while no other process has
	// it open upgrades it in place (upgradeMetaInPlace).
	formatVersion = 2
	// flagsVersion is queue.meta's version with a flags word: a queue
	// made with a flag set is written at it, so that a build of version 2,
	// which would read a message's checksum as its first bytes, refuses
	// it; one with none stays at formatVersion, readable by such builds.
	// The two differ in nothing else.
	flagsVersion = 3
	// pidTokenVersion is queue.meta's version 1.
	pidTokenVersion = 1
	// cycleVersion is the cycle files': unchanged since version 1.
	cycleVersion = 1
	metaMagic    = "OFFQUEUE"
	cycleMagic   = "OFFQCYCL"
	metaName     = "queue.meta"
	cycleSuffix  = ".oq"

	metaSize        = 16384
	metaFlagsOff    = 56
	metaChecksumOff = 248
	metaLockOff     = 256
	metaLatestOff   = 320
	metaBellOff     = 384
	metaSleepersOff = 388
	// metaSkippedOff is the first of the event counters, words outside
	// the checksum that every process increments atomically. Files made
	// before them hold zero there (no events), and builds before them
	// never read or write bytes 448-511, so they need no format version:
	// an older build's writers simply do not count.
	metaSkippedOff  = 448
	leaseTableOff   = 1024
	maxLeases       = 256
	leaseSize       = 16
	tailerTableOff  = 5120
	maxNamedTailers = 128
	tailerSlotSize  = 64
	maxTailerName   = 48

	headerSize       = 4096
	cycleChecksumOff = 120
	hintOff          = 128
	nextOff          = 192
	l1Off            = 256
	l1Entries        = (headerSize - l1Off) / 8 // 480
	indexEntries     = 4096
	indexArrayBytes  = indexEntries * 8
	// indexArraySlot is the payload length of an index array's slot: the
	// array padded so that the slot takes a multiple of 64 bytes, and the
	// messages after it keep the cache-line alignment of those before
	// (a stream of 32-byte slots never straddles two lines).
	indexArraySlot = indexArrayBytes + 56
	dataStart      = headerSize
)

// Slot header bits.
const (
	lenMask     = 1<<32 - 1
	leaseShift  = 32
	genShift    = 40
	genMask     = 1<<20 - 1
	flagMeta    = 1 << 60
	flagSkipped = 1 << 61
	flagEOF     = 1 << 62
	flagBusy    = 1 << 63 // not complete
	writerMask  = (1<<28 - 1) << leaseShift
)

// queue.meta's flags.
const (
	flagChecksums = 1 << 0
	knownFlags    = flagChecksums
)

// sumSize is the size of a message's checksum, in a queue of checksummed
// messages.
const sumSize = 8

// messageSum is the checksum of the message msg of index idx: the
// xxhash64 of its bytes, XOR its index times 2^64 divided by the golden
// ratio (an odd number, so that distinct indexes give distinct masks). A
// message read at another index than it was appended at, as a walk
// thrown off by a damaged length would read it, fails too.
func messageSum(msg []byte, idx uint64) uint64 {
	return xxhash.Sum64(msg) ^ idx*0x9e3779b97f4a7c15
}

// maxMessage is the largest payload: lengths past it are corrupt.
const maxMessage = 1 << 30

func slotSize(n uint64) int64 { return 8 + int64(n+7)&^7 }

type metaHeader struct {
	Version      uint32
	Roll         RollCycle
	IndexSpacing uint32
	RollLength   time.Duration
	Epoch        int64
	MaxCycleSize int64
	Created      int64
	Flags        uint32 // version flagsVersion only
}

func (h *metaHeader) encode() []byte {
	b := make([]byte, metaSize)
	le := binary.LittleEndian
	copy(b, metaMagic)
	le.PutUint32(b[8:], h.Version)
	le.PutUint32(b[12:], metaSize)
	le.PutUint32(b[16:], uint32(h.Roll))
	le.PutUint32(b[20:], h.IndexSpacing)
	le.PutUint64(b[24:], uint64(h.RollLength))
	le.PutUint64(b[32:], uint64(h.Epoch))
	le.PutUint64(b[40:], uint64(h.MaxCycleSize))
	le.PutUint64(b[48:], uint64(h.Created))
	le.PutUint32(b[metaFlagsOff:], h.Flags)
	le.PutUint64(b[metaChecksumOff:], xxhash.Sum64(b[:metaChecksumOff]))
	return b
}

// decodeMeta validates the metadata file's bytes (all of a file of
// fileSize bytes, up to metaSize). Each failure wraps its own sentinel. A
// file of pidTokenVersion is returned with that version, for the caller to
// upgrade or refuse.
func decodeMeta(b []byte, fileSize int64) (*metaHeader, error) {
	le := binary.LittleEndian
	if err := shm.CheckHeader(b, fileSize, metaMagic, pidTokenVersion, flagsVersion, metaSize, metaChecksumOff); err != nil {
		return nil, err
	}
	h := &metaHeader{
		Version:      le.Uint32(b[8:]),
		Roll:         RollCycle(le.Uint32(b[16:])),
		IndexSpacing: le.Uint32(b[20:]),
		RollLength:   time.Duration(le.Uint64(b[24:])),
		Epoch:        int64(le.Uint64(b[32:])),
		MaxCycleSize: int64(le.Uint64(b[40:])),
		Created:      int64(le.Uint64(b[48:])),
		Flags:        le.Uint32(b[metaFlagsOff:]),
	}
	switch {
	case h.Version < flagsVersion && h.Flags != 0, h.Version == flagsVersion && h.Flags == 0:
		return nil, fmt.Errorf("%w: flags %#x in version %d", ErrCorrupt, h.Flags, h.Version)
	case h.Flags&^knownFlags != 0:
		return nil, fmt.Errorf("%w: flags %#x: this build knows %#x", ErrVersion, h.Flags, knownFlags)
	case le.Uint32(b[12:]) != metaSize:
		return nil, fmt.Errorf("%w: metadata size %d", ErrCorrupt, le.Uint32(b[12:]))
	case !h.Roll.valid() || h.Roll.Length() != h.RollLength:
		return nil, fmt.Errorf("%w: roll cycle %d of %v", ErrCorrupt, h.Roll, h.RollLength)
	case !validSpacing(int64(h.IndexSpacing)):
		return nil, fmt.Errorf("%w: index spacing %d", ErrCorrupt, h.IndexSpacing)
	case h.MaxCycleSize < minCycleSize || h.MaxCycleSize > maxCycleSize || h.MaxCycleSize%pageSize != 0:
		return nil, fmt.Errorf("%w: maximum cycle size %d", ErrCorrupt, h.MaxCycleSize)
	case h.Epoch%86400 != 0:
		return nil, fmt.Errorf("%w: epoch %d", ErrCorrupt, h.Epoch)
	}
	return h, nil
}

type cycleHeader struct {
	Version      uint32
	Cycle        uint64
	Prev         uint64 // previous cycle + 1
	IndexSpacing uint32
	Created      int64
}

func (h *cycleHeader) encode() []byte {
	b := make([]byte, headerSize)
	le := binary.LittleEndian
	copy(b, cycleMagic)
	le.PutUint32(b[8:], h.Version)
	le.PutUint32(b[12:], headerSize)
	le.PutUint64(b[16:], h.Cycle)
	le.PutUint64(b[24:], h.Prev)
	le.PutUint32(b[32:], h.IndexSpacing)
	le.PutUint32(b[36:], indexEntries)
	le.PutUint32(b[40:], l1Entries)
	le.PutUint64(b[48:], uint64(h.Created))
	le.PutUint64(b[cycleChecksumOff:], xxhash.Sum64(b[:cycleChecksumOff]))
	return b
}

// decodeCycle validates a cycle file's header page.
func decodeCycle(b []byte, fileSize int64) (*cycleHeader, error) {
	le := binary.LittleEndian
	if err := shm.CheckHeader(b, fileSize, cycleMagic, cycleVersion, cycleVersion, headerSize, cycleChecksumOff); err != nil {
		return nil, err
	}
	h := &cycleHeader{
		Version:      le.Uint32(b[8:]),
		Cycle:        le.Uint64(b[16:]),
		Prev:         le.Uint64(b[24:]),
		IndexSpacing: le.Uint32(b[32:]),
		Created:      int64(le.Uint64(b[48:])),
	}
	switch {
	case le.Uint32(b[12:]) != headerSize || le.Uint32(b[36:]) != indexEntries || le.Uint32(b[40:]) != l1Entries:
		return nil, fmt.Errorf("%w: header geometry %d/%d/%d", ErrCorrupt, le.Uint32(b[12:]), le.Uint32(b[36:]), le.Uint32(b[40:]))
	case !validSpacing(int64(h.IndexSpacing)):
		return nil, fmt.Errorf("%w: index spacing %d", ErrCorrupt, h.IndexSpacing)
	case h.Cycle > maxCycle || h.Prev > h.Cycle:
		return nil, fmt.Errorf("%w: cycle %d, previous %d", ErrCorrupt, h.Cycle, int64(h.Prev)-1)
	}
	return h, nil
}

func validSpacing(n int64) bool { return n >= 1 && n <= 1<<16 && n&(n-1) == 0 }

// upgradeMetaInPlace rewrites queue.meta of pidTokenVersion as
// formatVersion; m is its mapping. The two differ only in what a token in
// the lock and the writer leases means, and the caller, alone with the
// file, has cleared them all (recoverAlone).
func upgradeMetaInPlace(f *os.File, m []byte) error {
	return shm.RewriteVersion(f, m, formatVersion, metaChecksumOff)
}
