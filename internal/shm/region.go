//go:build linux || darwin

package shm

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Region is an address range reserved for a file that grows: the file's
// first bytes are mapped at the start of the range, and Extend maps more
// of the file behind them as it grows, so that slices into the mapping
// never move. Pages of the range past the mapped prefix are PROT_NONE and
// cost no memory; callers must never index past Len.
type Region struct {
	base     unsafe.Pointer
	reserved int
	mapped   int
	writable bool
}

// Reserve reserves size bytes of address space, a multiple of the page
// size.
func Reserve(size int) (*Region, error) {
	if size <= 0 || size%os.Getpagesize() != 0 {
		return nil, fmt.Errorf("shm: reserve %d bytes: not a positive multiple of the page size", size)
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("shm: reserve %d bytes of address space: %w", size, err)
	}
	return &Region{base: p, reserved: size}, nil
}

// Extend maps the bytes [Len(), size) of f behind the mapped prefix and
// returns the whole prefix. size is a multiple of the page size, at most
// the reserved size; the file must hold all of it but the rest of its last
// page. Concurrent calls
// on one Region must be serialised by the caller.
func (r *Region) Extend(f *os.File, size int, writable bool) ([]byte, error) {
	switch {
	case r.base == nil:
		return nil, fmt.Errorf("shm: extend %s: region is unmapped", f.Name())
	case size%os.Getpagesize() != 0 || size > r.reserved:
		return nil, fmt.Errorf("shm: extend %s to %d bytes: outside the %d-byte reservation", f.Name(), size, r.reserved)
	case r.mapped > 0 && writable != r.writable:
		return nil, fmt.Errorf("shm: extend %s: cannot change protection", f.Name())
	}
	if size > r.mapped {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		// Past the end of the file only the rest of its last page may be
		// mapped (touching a page wholly past the end raises SIGBUS): it
		// reads zeros and is never written.
		if int64(size) >= st.Size()+int64(os.Getpagesize()) {
			return nil, fmt.Errorf("shm: extend %s to %d bytes: the file has %d", f.Name(), size, st.Size())
		}
		if end := min(int64(size), st.Size()); end > int64(r.mapped) {
			if err := back(f, int64(r.mapped), end-int64(r.mapped), writable); err != nil {
				return nil, err
			}
		}
		prot := unix.PROT_READ
		if writable {
			prot |= unix.PROT_WRITE
		}
		at := unsafe.Add(r.base, r.mapped)
		_, err = unix.MmapPtr(int(f.Fd()), int64(r.mapped), at, uintptr(size-r.mapped), prot,
			unix.MAP_SHARED|unix.MAP_FIXED)
		if err != nil {
			return nil, fmt.Errorf("mmap %s [%d, %d): %w", f.Name(), r.mapped, size, err)
		}
		r.mapped, r.writable = size, writable
	}
	return r.Bytes(), nil
}

// Bytes returns the mapped prefix.
func (r *Region) Bytes() []byte {
	if r.base == nil {
		return nil
	}
	return unsafe.Slice((*byte)(r.base), r.mapped)
}

// Len returns the size of the mapped prefix.
func (r *Region) Len() int { return r.mapped }

// Sync writes the mapped prefix's dirty pages to the file and waits.
func (r *Region) Sync() error {
	if r.mapped == 0 || !r.writable {
		return nil
	}
	return unix.Msync(r.Bytes(), unix.MS_SYNC)
}

// Release detaches the mapped prefix from the file but keeps its
// addresses, filled with private zero pages (as Mapping.Release does): a
// stale pointer into it reads zeros and writes nowhere instead of
// faulting, and the addresses are never reused. The reserved rest, where
// no pointer can point, is given back, so that a process that opens and
// closes many regions keeps only their mapped prefixes.
func (r *Region) Release() error {
	if r.base == nil {
		return nil
	}
	var err error
	if r.mapped > 0 {
		_, err = unix.MmapPtr(-1, 0, r.base, uintptr(r.mapped), unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	}
	if r.reserved > r.mapped {
		if uerr := unix.MunmapPtr(unsafe.Add(r.base, r.mapped), uintptr(r.reserved-r.mapped)); err == nil {
			err = uerr
		}
	}
	r.reserved, r.mapped = r.mapped, 0
	return err
}

// Unmap releases the whole range; no pointer into it may be used
// afterwards.
func (r *Region) Unmap() error {
	if r.base == nil {
		return nil
	}
	err := unix.MunmapPtr(r.base, uintptr(r.reserved))
	r.base, r.mapped = nil, 0
	return err
}

// ExtendTail maps the rest of f read-only, up to its end: for a reader
// that met data past what Extend gave it. Here it is Extend to the end
// of the file's last page; on Windows it maps a file's end that lies
// between 64 KiB boundaries, which only a file made on another system
// keeps (see region_windows.go).
func (r *Region) ExtendTail(f *os.File) ([]byte, error) {
	size, err := FileSize(f)
	if err != nil {
		return nil, err
	}
	return r.Extend(f, min(Pad(int(size), os.Getpagesize()), r.reserved), false)
}

// ViewAlign is the multiple of which a writer keeps the length of a file
// that a Region maps, so that readers can map on from the end: 1 here
// (any length maps); 64 KiB on Windows, where views start on such
// boundaries. A new file is made that long at once.
const ViewAlign = 1
