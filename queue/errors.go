package queue

import (
	"errors"

	"github.com/offmap/offmap/internal/shm"
)

// Errors returned by the queue. Test for them with errors.Is; the returned
// error usually wraps one of these with the path and the numbers involved.
var (
	// ErrNoMessage: no complete message at the tailer's position yet.
	ErrNoMessage = errors.New("queue: no message yet")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("queue: queue is closed")
	// ErrReadOnly: an append or an acknowledgement through a queue opened
	// read-only.
	ErrReadOnly = errors.New("queue: queue is open read-only")
	// ErrNotQueue: the directory holds files but no queue metadata.
	ErrNotQueue = errors.New("queue: directory is not a queue")
	// ErrTooLarge: the message is larger than a cycle file can take.
	ErrTooLarge = errors.New("queue: message too large")
	// ErrCycleFull: the current cycle file reached Options.MaxCycleSize
	// (or 2^32-1 messages); appends succeed again after the next roll.
	ErrCycleFull = errors.New("queue: cycle file is full")
	// ErrTooManyWriters: every writer lease is held by a live process.
	ErrTooManyWriters = errors.New("queue: too many writing processes")
	// ErrTooManyTailers: every named-tailer slot is taken.
	ErrTooManyTailers = errors.New("queue: too many named tailers")
	// ErrNotFound: the index names no message of the queue (its cycle is
	// missing or it lies past the end).
	ErrNotFound = errors.New("queue: index not in the queue")
	// ErrAbandoned: a reservation was committed after a reader had
	// skipped its slot, finding its writer's lease released or damaged
	// (a live writer is waited for); the message is lost for every reader
	// (append it again to send it).
	ErrAbandoned = errors.New("queue: message slot was abandoned")
	// ErrNoFileLocks: the file system cannot hold the open file
	// description lock by which each process that writes the queue shows
	// the others that it is alive: writable opens are refused there.
	ErrNoFileLocks = shm.ErrNoFileLocks
	// ErrUncommitted: Close found reservations (Reserve) neither
	// committed nor aborted, and aborted them; their Commit then returns
	// ErrClosed.
	ErrUncommitted = errors.New("queue: reservation neither committed nor aborted")
	// ErrOptionsMismatch: the options conflict with the existing queue.
	ErrOptionsMismatch = errors.New("queue: options conflict with the existing queue")
	// ErrInvalidOptions: the options cannot describe a queue.
	ErrInvalidOptions = errors.New("queue: invalid options")

	// ErrEmptyFile: a queue file exists but has no bytes.
	ErrEmptyFile = shm.ErrEmpty
	// ErrForeign: a queue file does not start with the expected magic
	// number, or is not a regular file. It is the same error value as
	// offmap.ErrNotMap.
	ErrForeign = shm.ErrForeign
	// ErrTruncated: a queue file is shorter than its header needs, or a
	// cycle file became shorter than this process mapped it (someone
	// truncated it while in use).
	ErrTruncated = shm.ErrTruncated
	// ErrVersion: a queue file has a format version this code cannot read.
	ErrVersion = shm.ErrVersion
	// ErrCorrupt: a queue file's header or content is damaged.
	ErrCorrupt = shm.ErrCorrupt
	// ErrSparse: a queue file has holes (a sparse copy) that could not be
	// given storage, usually because the file system is full.
	ErrSparse = shm.ErrSparse
)
