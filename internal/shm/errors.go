package shm

import "errors"

// Errors that describe a file rather than an operation; the map and queue
// packages export them under their own names.
var (
	ErrEmpty     = errors.New("file is empty")
	ErrForeign   = errors.New("not a file of this kind")
	ErrTruncated = errors.New("file is truncated")
	ErrVersion   = errors.New("unsupported format version")
	ErrCorrupt   = errors.New("file is corrupt")
)
