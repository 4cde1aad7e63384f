package shm

import (
	"errors"
	"os"
)

// Preallocate gives f at least size bytes, so that a full disk is an
// error now and never a fault when a page is touched. It never shrinks f
// nor changes a byte of it. Windows has no fallocate that extends a file
// without writing (SetEndOfFile would, but cannot tell whether another
// process grew the file meanwhile), so it writes zeros past the end, as on
// macOS.
func Preallocate(f *os.File, size int64) error { return extendZeroed(f, size) }

// Grow gives f storage for [off, off+n), a range that belongs to the
// caller alone, by writing zeros over it (extending the file if it is
// shorter). A full disk is an error wrapping ENOSPC.
func Grow(f *os.File, off, n int64) error { return writeZeros(f, off, n) }

// AllocateShared would give storage to a range another process uses
// without writing to it; Windows cannot.
func AllocateShared(f *os.File, off, n int64) error { return errors.ErrUnsupported }

// CreateAtomic builds a new file of size bytes, lets fill write its
// contents, and only then gives it the name path, so that path never
// shows a half-written file, even if this process dies. With durable set
// the file is flushed before it is renamed and the rename is written
// through. It returns an error wrapping os.ErrExist when path already
// exists. The file is built under a temporary name beside path, which a
// process killed meanwhile leaves behind.
func CreateAtomic(path string, mode os.FileMode, size int64, durable bool, fill func(f *os.File) error) error {
	return createViaTempName(path, mode, size, durable, fill)
}
