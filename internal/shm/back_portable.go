//go:build darwin || (linux && offmap_portable)

package shm

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// back makes sure the bytes [off, off+n) of f have storage, so that
// touching them through a mapping never raises SIGBUS for want of space.
// Files this package creates have no holes (Preallocate writes its
// zeros); a sparse copy does. A file opened read-only is reopened for
// writing to fill them, where the process may.
//
// Without fallocate (Linux only), holes are filled through a mapping of
// their own: one atomic add of zero per page, which makes the kernel give
// the page storage and changes no byte, whatever another process writes
// there at the same instant; then msync, so that a file system that
// allocates at write-back (APFS) reports a full disk here. Free space is
// checked first, so a full disk is ErrSparse wrapping ENOSPC, not a fault;
// a fault all the same (the disk filled meanwhile) is recovered and
// reported the same way (debug.SetPanicOnFault; in a -race build, where
// the race runtime performs atomics, it would abort instead).
func back(f *os.File, off, n int64, writable bool) error {
	if n <= 0 || allocated(f) {
		// Blocks cover the size: no hole, as far as a block count can
		// tell (see allocated).
		return nil
	}
	holes, err := holesIn(f, off, off+n)
	if err != nil || len(holes) == 0 {
		return err
	}
	w := f
	if !writable {
		w, err = reopenWritable(f)
		if err != nil {
			return fmt.Errorf("%w: %s has a hole at %d and is not writable here: %w", ErrSparse, f.Name(), holes[0].from, err)
		}
		defer w.Close()
	}
	var need int64
	for _, h := range holes {
		need += h.to - h.from
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(w.Fd()), &fs); err == nil && uint64(fs.Bavail)*uint64(fs.Bsize) < uint64(need) {
		return fmt.Errorf("%w: %s has %d bytes of holes from %d, the file system %d free: %w",
			ErrSparse, f.Name(), need, holes[0].from, uint64(fs.Bavail)*uint64(fs.Bsize), unix.ENOSPC)
	}
	for _, h := range holes {
		if err := fill(w, h); err != nil {
			return fmt.Errorf("%w: %s has a hole at %d: %w", ErrSparse, f.Name(), h.from, err)
		}
	}
	return nil
}

// span is a page-aligned range of a file.
type span struct{ from, to int64 }

// holesIn returns the pages of [off, end) that SEEK_HOLE calls holes, or
// all of them where the file system cannot say.
func holesIn(f *os.File, off, end int64) ([]span, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	page := int64(os.Getpagesize())
	end = min(end, Pad(st.Size(), page))
	fd := int(f.Fd())
	var holes []span
	for pos := off; pos < end; {
		h, err := unix.Seek(fd, pos, unix.SEEK_HOLE)
		if err != nil {
			if errors.Is(err, unix.ENXIO) {
				break // pos is at or past the end
			}
			// SEEK_HOLE unsupported: any page may be a hole.
			return []span{{off &^ (page - 1), end}}, nil
		}
		if h >= end {
			break
		}
		d, err := unix.Seek(fd, h, unix.SEEK_DATA)
		if err != nil || d > end {
			d = end // no data after the hole
		}
		holes = append(holes, span{h &^ (page - 1), Pad(d, page)})
		pos = d
	}
	return holes, nil
}

// reopenWritable opens f's path again for writing, and checks that it is
// still the same file.
func reopenWritable(f *os.File) (*os.File, error) {
	w, err := os.OpenFile(f.Name(), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	a, errA := f.Stat()
	b, errB := w.Stat()
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		w.Close()
		return nil, fmt.Errorf("%s was replaced since it was opened", f.Name())
	}
	return w, nil
}

// fill gives the pages of h storage through a temporary shared mapping.
func fill(w *os.File, h span) (err error) {
	size := int(h.to - h.from)
	p, err := unix.MmapPtr(int(w.Fd()), h.from, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap: %w", err)
	}
	defer unix.MunmapPtr(p, uintptr(size))
	mem := unsafe.Slice((*byte)(p), size)
	if err := touchPages(mem); err != nil {
		return err
	}
	return unix.Msync(mem, unix.MS_SYNC)
}

// touchPages writes every page of mem, a page-aligned shared mapping,
// with an atomic add of zero, turning a fault into an error.
func touchPages(mem []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("a page fault while giving it storage (the disk filled?): %w", unix.ENOSPC)
		}
	}()
	page := os.Getpagesize()
	for off := 0; off < len(mem); off += page {
		U32(mem, off).Add(0)
	}
	return nil
}

// growZeroed is Grow: writing zeros over the range is all it takes here.
func growZeroed(f *os.File, off, n int64) error { return writeZeros(f, off, n) }
