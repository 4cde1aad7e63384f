//go:build linux || darwin

package shm

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenFile opens path for reading and writing, or for reading only when
// readOnly is set or the process may not write it (permissions, a
// read-only file system); ro reports which. It refuses anything that is
// not a regular file, and never blocks doing so: open(2) of a FIFO put in
// place of a map waits for a writer forever unless O_NONBLOCK is set.
func OpenFile(path string, readOnly bool) (f *os.File, ro bool, err error) {
	if !readOnly {
		f, err = openRegular(path, unix.O_RDWR)
		if err == nil || !(errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EROFS)) {
			return f, false, err
		}
	}
	f, err = openRegular(path, unix.O_RDONLY)
	return f, true, err
}

func openRegular(path string, mode int) (*os.File, error) {
	fd, err := unix.Open(path, mode|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, mode|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		// A lease on the file (Samba, nfsd) refuses non-blocking opens:
		// a regular file may be opened blocking, as its lease breaks.
		var st unix.Stat_t
		if unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			fd, err = unix.Open(path, mode|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrForeign, path)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ErrSparse is returned when a file has holes (no storage behind some of
// its pages, as a copy made with cp --sparse=always has) that cannot be
// filled: a page fault on a hole needs storage, and on a full file system
// it raises SIGBUS instead of returning an error.
var ErrSparse = errors.New("file has holes that cannot be given storage (a sparse copy?)")

// allocated reports whether every page of f has storage, by its block
// count. SEEK_HOLE alone cannot tell: ext4 and xfs report ranges that
// fallocate reserved but nothing wrote yet (unwritten extents) as holes,
// and tmpfs reports such pages as holes too, so it would find holes in
// every file this package creates. A sparse copy has far fewer blocks than
// pages; only a file system's own metadata blocks could hide a hole, and
// those are few against a hole of the size a copy leaves.
func allocated(f *os.File) bool {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	page := int64(os.Getpagesize())
	return st.Blocks*512 >= (st.Size+page-1)/page*page
}
