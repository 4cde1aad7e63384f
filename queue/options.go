package queue

import (
	"fmt"
	"os"
	"time"
)

// RollCycle is how often a queue starts a new cycle file.
type RollCycle uint32

// The roll cycles. Cycle files are named after their start time in UTC.
//
// Fast starts a cycle every 100 ms, for messages that matter only for a
// moment: with KeepCycles it bounds a queue by time (KeepCycles 50 keeps
// about the last 5 s), and it lets a test see rolls and retention at work
// without waiting. It makes up to 36,000 files an hour, so pair it with
// KeepCycles; its cycle numbers last 13 years from the queue's creation.
const (
	Daily    RollCycle = 1 + iota // 20060102.oq
	Hourly                        // 20060102-15.oq
	Minutely                      // 20060102-1504.oq
	Secondly                      // 20060102-150405.oq
	Fast                          // 100 ms: 20060102-150405.0.oq
)

var rolls = [...]struct {
	name   string
	length time.Duration
	layout string
}{
	Daily:    {"daily", 24 * time.Hour, "20060102"},
	Hourly:   {"hourly", time.Hour, "20060102-15"},
	Minutely: {"minutely", time.Minute, "20060102-1504"},
	Secondly: {"secondly", time.Second, "20060102-150405"},
	Fast:     {"fast", 100 * time.Millisecond, "20060102-150405.0"},
}

func (r RollCycle) valid() bool { return r >= Daily && r <= Fast }

// Length returns the duration of one cycle.
func (r RollCycle) Length() time.Duration {
	if !r.valid() {
		return 0
	}
	return rolls[r].length
}

func (r RollCycle) String() string {
	if !r.valid() {
		return fmt.Sprintf("RollCycle(%d)", uint32(r))
	}
	return rolls[r].name
}

// Options say how to create a queue and how to open it. When the queue
// exists, zero values mean "take the queue's"; a non-zero Roll,
// MaxCycleSize or IndexSpacing that differs from the queue's is an
// ErrOptionsMismatch.
type Options struct {
	// Roll is how often a new cycle file starts; zero means Daily.
	Roll RollCycle
	// MaxCycleSize bounds one cycle file, in bytes (a multiple of 4096,
	// at most 32 GiB); an append past it gets ErrCycleFull until the next
	// roll. Every process reserves this much address space per open
	// cycle file, which costs no memory. Zero means 4 GiB.
	MaxCycleSize int64
	// IndexSpacing is how many messages apart the sparse index records
	// a position (a power of two); a seek reads at most this many headers.
	// Zero means 64.
	IndexSpacing int

	// BlockSize is the step in which cycle files grow, preallocated on
	// disk (a multiple of 4096). Small steps suit many small queues;
	// large ones, few busy queues. Zero means 256 KiB.
	BlockSize int
	// ChecksumMessages makes every message carry a checksum (xxhash64,
	// 8 bytes more per message, as Kafka checksums each batch), which
	// every read checks: a message whose bytes or length word were
	// damaged on disk, or by a stray write through the mapping, is an
	// ErrCorrupt instead of wrong bytes. Readers of a queue without it
	// check its slots against the sparse index, which catches a damaged
	// length within IndexSpacing messages but not a damaged payload.
	// docs/BENCHMARKS.md gives the cost. Only at creation; opening an
	// existing queue without checksums with it set is an
	// ErrOptionsMismatch, and zero takes the queue's.
	ChecksumMessages bool

	// ReadOnly opens the queue for reading only: appends and
	// acknowledgements return ErrReadOnly.
	ReadOnly bool
	// FileMode is the permission of new files; zero means 0600 (as for
	// map files: readable by the owner only; 0640 shares with a group).
	FileMode os.FileMode
	// SkipAfter is how long a reader waits at an unfinished message
	// before it checks whether its writer died; a dead writer's slot is
	// then skipped. A live writer is waited for. Zero means 20 ms.
	SkipAfter time.Duration
	// KeepCycles, when positive, makes the process that rolls to a new
	// cycle delete all but the newest KeepCycles cycle files, sparing any
	// that a named tailer has not acknowledged past.
	KeepCycles int
	// OnCycle, when set, is called when this process rolls the queue to
	// a new cycle, releases a cycle file it mapped, or deletes one. It
	// runs on the goroutine that caused the event and must not block.
	OnCycle func(CycleEvent)
	// ParkMin and ParkMax bound the sleep of the Park wait mode: it
	// starts at ParkMin and doubles after each empty poll up to ParkMax.
	// Zero means 125 us and 20 ms; set both equal for a fixed park.
	ParkMin, ParkMax time.Duration
	// BlockSpin is how long the Block and BlockThread wait modes poll
	// before they sleep:
	// a tailer following a busy queue then reads each message without
	// being woken, while an idle one pays one short spin. Zero means
	// 50 us; negative means never spin.
	BlockSpin time.Duration

	// clock, when set, replaces time.Now for choosing the cycle to
	// append to, so that tests roll at will. Not exported: processes
	// sharing a queue must agree on the time.
	clock func() time.Time
}

// CycleEvent tells an Options.OnCycle hook what happened to a cycle file.
type CycleEvent struct {
	Kind  CycleEventKind
	Cycle uint32
	Path  string
}

// CycleEventKind is what happened to a cycle file.
type CycleEventKind int

// The cycle events.
const (
	CycleRolled   CycleEventKind = iota + 1 // this process started the cycle
	CycleReleased                           // this process unmapped the cycle
	CycleDeleted                            // retention deleted the cycle file (WatchCycles: any process's)
	// This process found the cycle's write hint damaged (it is outside
	// the header's checksum) and reset it from a walk of the slots.
	CycleHintRepaired
	// WatchCycles saw the cycle file appear, made by any process.
	CycleCreated
)

// defaultMaxCycleSize is Options.MaxCycleSize's default. A variable so
// that tests under qemu-user, which keeps a descriptor per page of
// reserved address space, can lower it.
var defaultMaxCycleSize int64 = 4 << 30

const (
	pageSize         = 4096
	defaultBlockSize = 256 << 10
	minCycleSize     = 64 << 10
	maxCycleSize     = 32 << 30
	defaultSpacing   = 64
	defaultSkipAfter = 20 * time.Millisecond
	defaultParkMin   = 125 * time.Microsecond
	defaultParkMax   = 20 * time.Millisecond
	defaultBlockSpin = 50 * time.Microsecond
	maxCycle         = 1<<32 - 2
	maxSeq           = 1<<32 - 2
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

// check validates the options and fills in the per-process defaults.
func (o Options) check() (Options, error) {
	switch {
	case o.Roll != 0 && !o.Roll.valid():
		return o, invalid("unknown roll cycle %d", o.Roll)
	case o.MaxCycleSize != 0 && (o.MaxCycleSize < minCycleSize || o.MaxCycleSize > maxCycleSize || o.MaxCycleSize%pageSize != 0):
		return o, invalid("MaxCycleSize %d: want a multiple of 4096 in [64 KiB, 32 GiB]", o.MaxCycleSize)
	case o.IndexSpacing != 0 && !validSpacing(int64(o.IndexSpacing)):
		return o, invalid("IndexSpacing %d: want a power of two up to 65536", o.IndexSpacing)
	case o.BlockSize < 0 || o.BlockSize%pageSize != 0:
		return o, invalid("BlockSize %d: want a multiple of 4096", o.BlockSize)
	case o.SkipAfter < 0 || o.ParkMin < 0 || o.ParkMax < 0 || o.KeepCycles < 0:
		return o, invalid("negative duration or count")
	}
	if o.BlockSize == 0 {
		o.BlockSize = defaultBlockSize
	}
	if o.FileMode == 0 {
		o.FileMode = 0o600
	}
	if o.SkipAfter == 0 {
		o.SkipAfter = defaultSkipAfter
	}
	if o.ParkMin == 0 {
		o.ParkMin = defaultParkMin
	}
	if o.BlockSpin == 0 {
		o.BlockSpin = defaultBlockSpin
	}
	if o.ParkMax == 0 {
		o.ParkMax = max(defaultParkMax, o.ParkMin)
	}
	if o.ParkMax < o.ParkMin {
		return o, invalid("ParkMax %v below ParkMin %v", o.ParkMax, o.ParkMin)
	}
	return o, nil
}

// newMeta plans the metadata of a new queue.
func (o Options) newMeta(now time.Time) metaHeader {
	h := metaHeader{
		Version:      formatVersion,
		Roll:         o.Roll,
		IndexSpacing: uint32(o.IndexSpacing),
		MaxCycleSize: o.MaxCycleSize,
		Created:      now.UnixNano(),
		Epoch:        now.Unix() - now.Unix()%86400,
	}
	if h.Roll == 0 {
		h.Roll = Daily
	}
	if h.IndexSpacing == 0 {
		h.IndexSpacing = defaultSpacing
	}
	if h.MaxCycleSize == 0 {
		h.MaxCycleSize = defaultMaxCycleSize
	}
	h.RollLength = h.Roll.Length()
	if o.ChecksumMessages {
		h.Version, h.Flags = flagsVersion, flagChecksums
	}
	return h
}

// matches reports a conflict between the options and an existing queue.
func (o Options) matches(h *metaHeader) error {
	switch {
	case o.Roll != 0 && o.Roll != h.Roll:
		return fmt.Errorf("%w: roll cycle %v, the queue's is %v", ErrOptionsMismatch, o.Roll, h.Roll)
	case o.MaxCycleSize != 0 && o.MaxCycleSize != h.MaxCycleSize:
		return fmt.Errorf("%w: MaxCycleSize %d, the queue's is %d", ErrOptionsMismatch, o.MaxCycleSize, h.MaxCycleSize)
	case o.ChecksumMessages && h.Flags&flagChecksums == 0:
		return fmt.Errorf("%w: ChecksumMessages, the queue's messages carry no checksums", ErrOptionsMismatch)
	case o.IndexSpacing != 0 && uint32(o.IndexSpacing) != h.IndexSpacing:
		return fmt.Errorf("%w: IndexSpacing %d, the queue's is %d", ErrOptionsMismatch, o.IndexSpacing, h.IndexSpacing)
	}
	return nil
}
