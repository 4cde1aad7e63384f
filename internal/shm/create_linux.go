//go:build linux && !offmap_portable

package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Preallocate gives f at least size bytes of real disk blocks (fallocate),
// so that a full disk is an error now and never a SIGBUS when a page is
// touched. It never shrinks f nor changes a byte of it, so other processes
// may use the file meanwhile. Where the file system cannot fallocate, it
// writes zeros past the end (extendZeroed).
func Preallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("fallocate %s (%d bytes): %w", f.Name(), size, err)
	}
	return extendZeroed(f, size)
}

// Grow gives f real storage for [off, off+n), a range that belongs to the
// caller alone, extending the file if it is shorter. fallocate never
// shrinks a file, so processes growing one file at once cannot undo each
// other. A full disk is an error wrapping ENOSPC here, never a SIGBUS
// later. Where the file system cannot fallocate, it writes zeros over the
// range.
func Grow(f *os.File, off, n int64) error {
	err := fallocate(f, off, n)
	if errors.Is(err, errors.ErrUnsupported) {
		return writeZeros(f, off, n)
	}
	return err
}

// AllocateShared gives f storage for [off, off+n) without writing a byte
// (fallocate), so it may be called on a range that another process uses:
// a map's process that finds space claimed past the end of the file gives
// it storage for its slow claimant. errors.ErrUnsupported where that
// cannot be done.
func AllocateShared(f *os.File, off, n int64) error { return fallocate(f, off, n) }

func fallocate(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, off, n)
	for errors.Is(err, unix.EINTR) { // a signal, such as the Go scheduler's
		err = unix.Fallocate(int(f.Fd()), 0, off, n)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("fallocate %s: %w", f.Name(), errors.ErrUnsupported)
	}
	return fmt.Errorf("fallocate %s [%d, %d): %w", f.Name(), off, off+n, err)
}

// CreateAtomic builds a new file of size bytes, lets fill write its
// contents, and only then links it at path, so that path never shows a
// half-written file, even if this process dies. With durable set it also
// syncs the file before linking it and the directory after, so that the
// file survives a power loss too. It returns an error wrapping os.ErrExist
// when path already exists (another process won the race to create it).
func CreateAtomic(path string, mode os.FileMode, size int64, durable bool, fill func(f *os.File) error) error {
	dir := filepath.Dir(path)
	fd, err := openUnnamed(dir, mode)
	if errors.Is(err, errors.ErrUnsupported) {
		return createViaTempName(path, mode, size, durable, fill)
	}
	if err != nil {
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := prepare(f, mode, size, durable, fill); err != nil {
		return err
	}
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.ENOENT) {
		// No /proc (a chroot, a container that hides it): linking by
		// descriptor needs CAP_DAC_READ_SEARCH, else a temporary name.
		if err = unix.Linkat(fd, "", unix.AT_FDCWD, path, unix.AT_EMPTY_PATH); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
			return createViaTempName(path, mode, size, durable, fill)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "link", Old: "(new file)", New: path, Err: err}
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// CreateUnnamed creates an empty file in dir that has no name (O_TMPFILE),
// for reading and writing: it is gone once closed, or when the process
// dies, and no other process can open it. On a file system without
// O_TMPFILE it is created under a temporary name, removed at once
// (createRemoved). A directory the process may not write to gives an
// error wrapping os.ErrPermission (or EROFS).
func CreateUnnamed(dir string) (*os.File, error) {
	fd, err := openUnnamed(dir, 0o600)
	if errors.Is(err, errors.ErrUnsupported) {
		return createRemoved(dir)
	}
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed)")), nil
}

// openUnnamed opens a new file with no name in dir (O_TMPFILE). An error
// that says why dir takes no new file (missing, not a directory, not
// writable, read-only, full) is returned as it is, for the caller to
// report; any other, such as EOPNOTSUPP from a file system without
// O_TMPFILE or EISDIR from a kernel without it, wraps
// errors.ErrUnsupported: a file under a temporary name may still work.
func openUnnamed(dir string, mode os.FileMode) (int, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, uint32(mode.Perm()))
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EROFS) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT):
		return -1, err
	}
	return -1, fmt.Errorf("O_TMPFILE in %s: %w (%w)", dir, errors.ErrUnsupported, err)
}
