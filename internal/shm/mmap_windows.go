package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Mapping is a range of a file mapped shared into memory.
type Mapping struct {
	data     []byte
	writable bool
	file     windows.Handle
	zeroed   bool
	plain    bool // not in a placeholder (mapPlain)
}

// Map maps size bytes of f from offset off, a multiple of 64 KiB (the
// allocation granularity). The caller has checked that the file holds
// them. The view is put in a placeholder, so that Release can put zero
// pages at its address; but such a view is whole pages within the file,
// so where the file ends inside the last page (a version-1 map), the view
// is a plain one (mapPlain).
func Map(f *os.File, off int64, size int, writable bool) (*Mapping, error) {
	if off%int64(allocationGranularity) != 0 || size <= 0 {
		return nil, fmt.Errorf("shm: map %s [%d, +%d): not a positive size from a multiple of 64 KiB", f.Name(), off, size)
	}
	span := Pad(size, os.Getpagesize())
	fileSize, err := FileSize(f)
	if err != nil {
		return nil, err
	}
	if fileSize < off+int64(span) {
		return mapPlain(f, off, size, writable)
	}
	if err := back(f, off, int64(span), writable); err != nil {
		return nil, err
	}
	section, err := newSection(f, off+int64(span), writable)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(section)
	at, err := virtualAlloc2(0, span, memReserve|memReservePlaceholder, pageNoAccess)
	if err != nil {
		return nil, fmt.Errorf("shm: map %s: %w", f.Name(), err)
	}
	prot := uint32(pageReadOnly)
	if writable {
		prot = pageReadWrite
	}
	if _, err := mapViewOfFile3(section, at, off, span, prot); err != nil {
		windows.VirtualFree(at, 0, memRelease)
		return nil, fmt.Errorf("MapViewOfFile3 %s: %w", f.Name(), err)
	}
	return &Mapping{data: unsafe.Slice((*byte)(pointer(at)), size), writable: writable, file: windows.Handle(f.Fd())}, nil
}

// mapPlain maps size bytes of f from off where the system chooses, not
// in a placeholder: Release then frees the addresses and commits zero
// pages there at once, which another allocation of the process could take
// first (then they stay free).
func mapPlain(f *os.File, off int64, size int, writable bool) (*Mapping, error) {
	if err := back(f, off, int64(size), writable); err != nil {
		return nil, err
	}
	section, err := newSection(f, off+int64(size), writable)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(section)
	access := uint32(windows.FILE_MAP_READ)
	if writable {
		access = windows.FILE_MAP_WRITE
	}
	at, err := mapViewOfFileEx(section, access, off, size, 0)
	if err != nil {
		return nil, fmt.Errorf("MapViewOfFileEx %s: %w", f.Name(), err)
	}
	return &Mapping{data: unsafe.Slice((*byte)(pointer(at)), size), writable: writable, file: windows.Handle(f.Fd()), plain: true}, nil
}

// Bytes returns the mapped memory.
func (m *Mapping) Bytes() []byte { return m.data }

func (m *Mapping) addr() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(m.data))) }

// Sync writes dirty pages of the mapping to the file and waits.
func (m *Mapping) Sync() error {
	if len(m.data) == 0 || !m.writable || m.zeroed {
		return nil
	}
	if err := windows.FlushViewOfFile(m.addr(), uintptr(len(m.data))); err != nil {
		return err
	}
	return windows.FlushFileBuffers(m.file)
}

// Release detaches the mapping from the file but keeps its address range,
// filled with private zero pages where the system can commit them (else
// left inaccessible).
func (m *Mapping) Release() error {
	if len(m.data) == 0 || m.zeroed {
		return nil
	}
	span := Pad(len(m.data), os.Getpagesize())
	if m.plain {
		if err := windows.UnmapViewOfFile(m.addr()); err != nil {
			return err
		}
		m.zeroed = true
		windows.VirtualAlloc(m.addr(), uintptr(span), memReserve|memCommit, pageReadWrite)
		return nil
	}
	if err := unmapToPlaceholder(m.addr()); err != nil {
		return err
	}
	m.zeroed = true
	virtualAlloc2(m.addr(), span, memReserve|memCommit|memReplacePlaceholder, pageReadWrite)
	return nil
}

// Unmap removes the mapping; no pointer into it may be used afterwards.
func (m *Mapping) Unmap() error {
	if len(m.data) == 0 {
		return nil
	}
	waitLooks()
	var err error
	if m.zeroed {
		err = windows.VirtualFree(m.addr(), 0, memRelease)
	} else {
		err = windows.UnmapViewOfFile(m.addr())
	}
	m.data = nil
	return err
}

// Whole-file advisory locks are byte-range locks (LockFileEx) on bytes far
// past any file's end: Windows locks are mandatory for ReadFile and
// WriteFile, so a lock on the file's bytes would stop other processes
// reading its header. The kernel drops them when the handle is closed or
// the process dies. Two bytes, so that a map attached to a file (a
// shared lock) can still grow it (lockGrowth, exclusive).
const (
	attachByte = 1<<62 - 1
	growthByte = 1<<62 - 2
)

// Flock takes a whole-file advisory lock, shared or exclusive.
func Flock(f *os.File, exclusive, nonblocking bool) error {
	return lockByte(f, attachByte, exclusive, nonblocking)
}

// growthMu serialises this process's own holders of the growth lock: a
// byte-range lock belongs to a handle, not a thread, and lockByte drops
// the handle's lock before it asks, so a second goroutine would take the
// lock from the first.
var growthMu sync.Mutex

func lockGrowth(f *os.File) error {
	growthMu.Lock()
	if err := lockByte(f, growthByte, true, false); err != nil {
		growthMu.Unlock()
		return err
	}
	return nil
}

func unlockGrowth(f *os.File) {
	unlockByte(windows.Handle(f.Fd()), growthByte)
	growthMu.Unlock()
}

func lockByte(f *os.File, at uint64, exclusive, nonblocking bool) error {
	var flags uint32
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	if nonblocking {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	h := windows.Handle(f.Fd())
	if !nonblocking {
		// A shared lock held by this handle would make an exclusive
		// request wait for itself; Flock is called to change a lock's
		// kind (exclusive, then shared) and Windows does not convert.
		unlockByte(h, at)
	}
	ov := windows.Overlapped{Offset: uint32(at), OffsetHigh: uint32(at >> 32)}
	err := windows.LockFileEx(h, flags, 0, 1, 0, &ov)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING):
		return ErrWouldBlock
	default:
		return fmt.Errorf("LockFileEx %s: %w", f.Name(), err)
	}
}

func unlockByte(h windows.Handle, at uint64) error {
	ov := windows.Overlapped{Offset: uint32(at), OffsetHigh: uint32(at >> 32)}
	return windows.UnlockFileEx(h, 0, 1, 0, &ov)
}

// createViaTempName builds the file under a temporary name, hidden from
// the listing by a leading dot, and renames it to path only if nothing is
// there (MoveFileEx without MOVEFILE_REPLACE_EXISTING): a crash may leave
// the temporary file behind, never a partial file at path.
func createViaTempName(path string, mode os.FileMode, size int64, durable bool, fill func(f *os.File) error) error {
	dir := filepath.Dir(path)
	var f *os.File
	var tmp string
	for range 100 {
		tmp = filepath.Join(dir, fmt.Sprintf(".%s.creating-%d", filepath.Base(path), randomBits()%1e12))
		var err error
		f, err = openShared(tmp, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.CREATE_NEW)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	if f == nil {
		return fmt.Errorf("create %s: no free temporary name", path)
	}
	defer os.Remove(tmp)
	defer f.Close()
	if err := prepare(f, mode, size, durable, fill); err != nil {
		return err
	}
	from, err := windows.UTF16PtrFromString(tmp)
	if err != nil {
		return err
	}
	to, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	flags := uint32(0)
	if durable {
		flags |= windows.MOVEFILE_WRITE_THROUGH
	}
	if err := windows.MoveFileEx(from, to, flags); err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}

// createRemoved creates a file in dir under a temporary name, opened with
// every sharing flag, and deletes it: the file stays, without a name (or,
// before POSIX delete semantics, a name no one can open), until the
// returned handle is closed or the process dies.
func createRemoved(dir string) (*os.File, error) {
	for range 100 {
		tmp := filepath.Join(dir, fmt.Sprintf(".offmap-unnamed-%d", randomBits()%1e12))
		f, err := openShared(tmp, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.CREATE_NEW)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := os.Remove(tmp); err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("create in %s: no free temporary name", dir)
}

// noSpace is in sys_windows.go.

// SyncDir does nothing: Windows cannot flush a directory; MoveFileEx with
// MOVEFILE_WRITE_THROUGH made the rename durable.
func SyncDir(string) error { return nil }
