//go:build darwin || windows || (linux && offmap_portable)

package shm

import (
	"errors"
	"os"
)

// Preallocate gives f at least size bytes of real disk blocks, so that a
// full disk is an error now and never a SIGBUS when a page is touched. It
// never shrinks f nor changes a byte of it, so other processes may use the
// file meanwhile. Without fallocate (Linux only; macOS's F_PREALLOCATE
// reserves space past the end but does not extend a file, and Windows'
// SetEndOfFile cannot tell whether another process grew the file
// meanwhile) it writes zeros
// past the end (extendZeroed): the bytes are written once, to the page
// cache, where fallocate only reserves blocks.
func Preallocate(f *os.File, size int64) error { return extendZeroed(f, size) }

// Grow gives f real storage for [off, off+n), a range that belongs to the
// caller alone, by writing zeros over it (extending the file if it is
// shorter): the one way to reserve blocks inside a file without fallocate.
// A full disk is an error wrapping ENOSPC here, never a SIGBUS later. On
// Windows a file that grows past its end is extended to the next 64 KiB
// boundary at once (growZeroed in region_windows.go).
func Grow(f *os.File, off, n int64) error { return growZeroed(f, off, n) }

// AllocateShared would give storage to a range another process uses
// without writing to it; without fallocate it cannot be done.
func AllocateShared(f *os.File, off, n int64) error { return errors.ErrUnsupported }

// CreateAtomic builds a new file of size bytes, lets fill write its
// contents, and only then links it at path, so that path never shows a
// half-written file, even if this process dies. With durable set it also
// syncs the file before linking it and the directory after (Windows:
// the rename is written through), so that the
// file survives a power loss too. It returns an error wrapping os.ErrExist
// when path already exists (another process won the race to create it).
//
// Without O_TMPFILE (Linux only) the file is built under a temporary name
// in the same directory, hidden by a leading dot: a process killed while
// building it leaves that file behind, never a half-written one at path.
func CreateAtomic(path string, mode os.FileMode, size int64, durable bool, fill func(f *os.File) error) error {
	return createViaTempName(path, mode, size, durable, fill)
}

// CreateUnnamed creates an empty file in dir for reading and writing,
// whose name is removed at once (createRemoved): it is gone once closed,
// or when the process dies. (Without O_TMPFILE, a process killed between
// creating and removing leaves the name, .offmap-unnamed-*, behind.) A
// directory the process may not write to gives an error wrapping
// os.ErrPermission (or EROFS).
func CreateUnnamed(dir string) (*os.File, error) { return createRemoved(dir) }
