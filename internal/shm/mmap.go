//go:build linux || darwin

package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is a range of a file mapped shared into memory.
type Mapping struct {
	data     []byte
	writable bool
}

// Map maps size bytes of f from offset off. The caller has checked that
// the file holds them: touching a page past EOF raises SIGBUS. Holes in
// the range are given storage first (see back).
func Map(f *os.File, off int64, size int, writable bool) (*Mapping, error) {
	if err := back(f, off, int64(size), writable); err != nil {
		return nil, err
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	p, err := unix.MmapPtr(int(f.Fd()), off, nil, uintptr(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return &Mapping{data: unsafe.Slice((*byte)(p), size), writable: writable}, nil
}

// Bytes returns the mapped memory.
func (m *Mapping) Bytes() []byte { return m.data }

// Sync writes dirty pages of the mapping to the file and waits (msync).
func (m *Mapping) Sync() error {
	if len(m.data) == 0 || !m.writable {
		return nil
	}
	return unix.Msync(m.data, unix.MS_SYNC)
}

// Release detaches the mapping from the file but keeps its address range,
// filled with private zero pages that cost no memory until written. A
// stale pointer into it (a value handle used after Close) then reads zeros
// and writes nowhere instead of faulting. The range is never reused.
func (m *Mapping) Release() error {
	if len(m.data) == 0 {
		return nil
	}
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(m.data)), uintptr(len(m.data)),
		unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	return err
}

// Unmap removes the mapping; no pointer into it may be used afterwards.
func (m *Mapping) Unmap() error {
	if len(m.data) == 0 {
		return nil
	}
	waitLooks()
	err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(m.data)), uintptr(len(m.data)))
	m.data = nil
	return err
}

// Flock takes a whole-file advisory lock, shared or exclusive. The kernel
// drops it when the file is closed or the process dies.
func Flock(f *os.File, exclusive, nonblocking bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if nonblocking {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return ErrWouldBlock
		default:
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
	}
}

// lockGrowth and unlockGrowth serialise extendZeroed between processes:
// an exclusive flock, which a map file attached (a shared flock) does not
// take while it grows.
func lockGrowth(f *os.File) error { return Flock(f, true, false) }

func unlockGrowth(f *os.File) { unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// createViaTempName is CreateAtomic for file systems without O_TMPFILE: a
// crash may leave the temporary file behind, never a partial map.
func createViaTempName(path string, mode os.FileMode, size int64, durable bool, fill func(f *os.File) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".creating-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	defer f.Close()
	if err := prepare(f, mode, size, durable, fill); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// createRemoved creates a file in dir under a temporary name and removes
// the name, leaving a file that only the returned descriptor reaches.
func createRemoved(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".offmap-unnamed-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// noSpace is err: these systems report a full disk as ENOSPC.
func noSpace(err error) error { return err }

// SyncDir makes the names made in dir durable (fsync of the directory).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}
