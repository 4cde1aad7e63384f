//go:build linux || darwin

package shm

import (
	"errors"
	"fmt"
	"os"
	"syscall"

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

// FileSize returns f's size without allocating (os.File.Stat does), so
// that a tailer's seeks and waits stay allocation-free.
func FileSize(f *os.File) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return st.Size, nil
}

// Dup returns a second *os.File for f's open file, which closes
// independently of f.
func Dup(f *os.File) (*os.File, error) {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: f.Name(), Err: err}
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// CopyOwner gives path the owner and group of fi's file, where the
// process may (else path stays its own).
func CopyOwner(path string, fi os.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		os.Chown(path, int(st.Uid), int(st.Gid))
	}
}

// AddressSpaceLimit describes the process's limit on address space
// (RLIMIT_AS, ulimit -v), for errors about failed reservations.
func AddressSpaceLimit() string {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &rl) == nil && rl.Cur < 1<<62 { // else unlimited: RLIM_INFINITY differs between systems
		return fmt.Sprintf("the address-space limit (ulimit -v) is %d bytes", rl.Cur)
	}
	return "no address-space limit (ulimit -v) is set"
}

// Remove removes the name path, which other processes may have open and
// mapped: they keep the file until they close it.
func Remove(path string) error { return os.Remove(path) }

// IsNamed reports whether path names f's file, and not one put in its
// place since f was opened.
func IsNamed(f *os.File, path string) bool {
	a, errA := f.Stat()
	b, errB := os.Stat(path)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// Replace renames from to path, in place of the file that open, holding
// its lock, has open; open is closed once the new file is in place.
func Replace(from, path string, open *os.File) error {
	defer open.Close()
	return os.Rename(from, path)
}
