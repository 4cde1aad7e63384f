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

// extendZeroed makes f at least size bytes long by writing zeros past its
// end, which gives the new bytes storage (a full disk is ENOSPC here). It
// never writes below the end, so data that other processes write through
// their mappings is safe, and it holds an exclusive flock while it looks
// at the size and writes, so that two processes growing the file at once
// cannot both write zeros over the same new range after one of them has
// put data there. f must not be flocked otherwise (a map file is not
// preallocated after it is attached; a queue's cycle files are never
// flocked); calls on one *os.File are serialised by the caller.
func extendZeroed(f *os.File, size int64) error {
	if err := Flock(f, true, false); err != nil {
		return err
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	st, err := f.Stat()
	if err != nil {
		return err
	}
	for off := st.Size(); off < size; {
		n := min(size-off, int64(len(zeroChunk)))
		if _, err := f.WriteAt(zeroChunk[:n], off); err != nil {
			return fmt.Errorf("preallocate %s (%d bytes): %w", f.Name(), size, err)
		}
		off += n
	}
	return nil
}

var zeroChunk [256 << 10]byte

// writeZeros writes zeros over [off, off+n) of f, extending it if it is
// shorter. The range must be the caller's alone: whatever another process
// wrote there is overwritten.
func writeZeros(f *os.File, off, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeroChunk)))
		if _, err := f.WriteAt(zeroChunk[:k], off); err != nil {
			return fmt.Errorf("grow %s: %w", f.Name(), err)
		}
		off, n = off+k, n-k
	}
	return nil
}

// ErrWouldBlock is returned by Flock with nonblocking set when another
// open file holds a conflicting lock.
var ErrWouldBlock = errors.New("file is locked by another process")

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
	return syncDir(dir)
}

func prepare(f *os.File, mode os.FileMode, size int64, durable bool, fill func(f *os.File) error) error {
	if err := f.Chmod(mode.Perm()); err != nil {
		return err
	}
	if err := Preallocate(f, size); err != nil {
		return err
	}
	if err := fill(f); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return f.Sync()
}

func syncDir(dir string) error {
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
