//go:build linux && !offmap_portable

package shm

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// back makes sure the bytes [off, off+n) of f have storage, so that
// touching them through a mapping never raises SIGBUS for want of space.
// Files this package creates have no holes (Preallocate); a sparse copy
// does. Holes are filled with fallocate, which keeps their zeros and the
// data around them, so it is safe while other processes use the file. A
// file opened read-only is reopened for writing to do it, where the
// process may.
func back(f *os.File, off, n int64, writable bool) error {
	hole, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
	if err != nil || hole >= off+n {
		// No hole, or a file system that cannot say: its files are
		// whole as far as this package can tell.
		return nil
	}
	if writable && !onTmpfs(f) {
		// Cheap where the blocks exist already; exact where the block
		// count could hide a small hole.
		err := unix.Fallocate(int(f.Fd()), 0, hole, off+n-hole)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("%w: %s has a hole at %d: fallocate: %w", ErrSparse, f.Name(), hole, err)
		}
		// A file system without fallocate: judge by the block count.
	}
	if allocated(f) {
		return nil
	}
	w := f
	if !writable {
		w, err = os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("%w: %s has a hole at %d and is not writable here: %w", ErrSparse, f.Name(), hole, err)
		}
		defer w.Close()
	}
	if err := unix.Fallocate(int(w.Fd()), 0, hole, off+n-hole); err != nil {
		return fmt.Errorf("%w: %s has a hole at %d: fallocate: %w", ErrSparse, f.Name(), hole, err)
	}
	return nil
}

// onTmpfs reports whether f lives on tmpfs, whose block counts are exact
// and where fallocate over a large file walks every page.
func onTmpfs(f *os.File) bool {
	var fs unix.Statfs_t
	return unix.Fstatfs(int(f.Fd()), &fs) == nil && fs.Type == unix.TMPFS_MAGIC
}
