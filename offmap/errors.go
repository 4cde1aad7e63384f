package offmap

import (
	"errors"

	"github.com/offmap/offmap/internal/shm"
)

// Errors returned by the map. Test for them with errors.Is; the returned
// error usually wraps one of these with the path and the numbers involved.
var (
	// ErrNotFound: the key is not in the map.
	ErrNotFound = errors.New("offmap: key not found")
	// ErrFull: the map could not grow to take the new entry: it reached
	// Options.MaxFileSize, the file system is full, or the segment its
	// limit; nothing was changed. Reads, updates that need no more room
	// and deletes still work, and space freed by deletes is reused.
	ErrFull = errors.New("offmap: map is full")
	// ErrClosed: the map was closed.
	ErrClosed = errors.New("offmap: map is closed")
	// ErrReadOnly: a write through a map opened read-only.
	ErrReadOnly = errors.New("offmap: map is open read-only")
	// ErrKeyTooLarge: the key is longer than the map's MaxKeySize.
	ErrKeyTooLarge = errors.New("offmap: key too large")
	// ErrValueTooLarge: the value is longer than the map's MaxValueSize.
	ErrValueTooLarge = errors.New("offmap: value too large")
	// ErrValueSize: a value handle was asked for an entry whose value has
	// another size, or a Put tried to change the size of a value that
	// handles point into.
	ErrValueSize = errors.New("offmap: value size does not match")
	// ErrPinned: a read-modify-write (Update, UpdateKeys, CompareAndSwap)
	// of a value that value handles point into, which they change without
	// any lock: only a 4- or 8-byte word can be changed atomically under
	// them (Update and CompareAndSwap do), so change it through the
	// handles. Also an expiry time (PutTTL, PutExpiring) for such a
	// value, which would detach the handles when it passed.
	ErrPinned = errors.New("offmap: value handles point into this value; change it through them")
	// ErrOptionsMismatch: the options conflict with the existing file.
	ErrOptionsMismatch = errors.New("offmap: options conflict with the existing file")
	// ErrInvalidOptions: the options cannot describe a map.
	ErrInvalidOptions = errors.New("offmap: invalid options")
	// ErrLockTimeout: a live process held a segment lock longer than
	// Options.LockTimeout.
	ErrLockTimeout = shm.ErrLockTimeout
	// ErrNoFileLocks: the file system cannot hold the open file
	// description lock by which each process that writes the map shows
	// the others that it is alive (a few network and FUSE file systems):
	// writable opens are refused there.
	ErrNoFileLocks = shm.ErrNoFileLocks

	// ErrEmptyFile: the file exists but has no bytes.
	ErrEmptyFile = shm.ErrEmpty
	// ErrNotMap: the file is of another kind (it does not start with the
	// offmap magic number) or is not a regular file. It is the same error
	// value as queue.ErrForeign: a file that is neither a map nor a queue
	// file fails either test.
	ErrNotMap = shm.ErrForeign
	// ErrTruncated: the file is shorter than its header says.
	ErrTruncated = shm.ErrTruncated
	// ErrVersion: the file has a format version this code cannot read
	// (usually one written by a newer release).
	ErrVersion = shm.ErrVersion
	// ErrCorrupt: the file's header or content is damaged.
	ErrCorrupt = shm.ErrCorrupt
	// ErrSparse: the file has holes (a copy made with cp --sparse=always)
	// that could not be given storage, usually because the file system is
	// full; a page fault on a hole would otherwise raise SIGBUS. Open
	// fills holes itself when there is room.
	ErrSparse = shm.ErrSparse
)
