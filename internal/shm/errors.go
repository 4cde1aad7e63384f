package shm

import (
	"errors"
	"strings"
)

// Errors that describe a file rather than an operation; the map and queue
// packages export them under their own names.
var (
	ErrEmpty     = errors.New("file is empty")
	ErrForeign   = errors.New("not a file of this kind")
	ErrTruncated = errors.New("file is truncated")
	ErrVersion   = errors.New("unsupported format version")
	ErrCorrupt   = errors.New("file is corrupt")
)

// OpError is the error of an operation of package Pkg ("offmap",
// "queue") on a file or directory. Its message names the package once and
// the path once, however the error it wraps is worded: the packages'
// sentinel errors start with their package name, and an *os.PathError
// names its path.
type OpError struct {
	Pkg, Op, Path string
	Err           error
}

func (e *OpError) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), e.Pkg+": ")
	if strings.Contains(msg, e.Path) {
		return e.Pkg + ": " + msg // it names the path already
	}
	return e.Pkg + ": " + e.Op + " " + e.Path + ": " + msg
}

func (e *OpError) Unwrap() error { return e.Err }

// ErrSparse is returned when a file has holes (no storage behind some of
// its pages, as a copy made with cp --sparse=always has) that cannot be
// filled: a page fault on a hole needs storage, and on a full file system
// it raises SIGBUS instead of returning an error.
var ErrSparse = errors.New("file has holes that cannot be given storage (a sparse copy?)")

// ErrNoPlaceholders: the system cannot reserve address space for a file
// to grow into (Windows before 10 1803, or Wine 8.0, have no placeholder
// reservations).
var ErrNoPlaceholders = errors.New("this system cannot reserve address space for a growing mapping (Windows 10 1803 or later is needed)")
