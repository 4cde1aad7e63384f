package shm

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The placeholder calls of Windows 10 1803 and later, which
// golang.org/x/sys/windows does not wrap: they let a Region reserve
// address space and map a growing file into it piece by piece, as
// mmap(MAP_FIXED) does on Linux (doc.go, Decisions).
var (
	kernelbase            = windows.NewLazySystemDLL("kernelbase.dll")
	procVirtualAlloc2     = kernelbase.NewProc("VirtualAlloc2")
	procMapViewOfFile3    = kernelbase.NewProc("MapViewOfFile3")
	procUnmapViewOfFile2  = kernelbase.NewProc("UnmapViewOfFile2")
	procSetThreadPriority = windows.NewLazySystemDLL("kernel32.dll").NewProc("SetThreadPriority")
)

const (
	memCommit               = 0x00001000
	memReserve              = 0x00002000
	memReplacePlaceholder   = 0x00004000
	memRelease              = 0x00008000
	memReservePlaceholder   = 0x00040000
	memPreservePlaceholder  = 0x00000002
	memCoalescePlaceholders = 0x00000001

	pageNoAccess  = 0x01
	pageReadOnly  = 0x02
	pageReadWrite = 0x04
)

// allocationGranularity is the alignment of every view's address and
// file offset: 64 KiB on every version of Windows (SYSTEM_INFO's
// dwAllocationGranularity).
const allocationGranularity = 64 << 10

// ViewAlign is the multiple of which a writer keeps the length of a file
// that a Region maps, so that readers can map on from the end: views
// start on 64 KiB boundaries (region_windows.go). A new file is made that
// long at once, so that a reader that opens it before its creator maps it
// does not find its end between two.
const ViewAlign = allocationGranularity

// errNoPlaceholders is returned where kernelbase lacks the calls
// (Windows before 10 version 1803).
var errNoPlaceholders = errors.New("this Windows lacks VirtualAlloc2 and MapViewOfFile3 (Windows 10 version 1803 or later is needed)")

func placeholdersMissing() error {
	for _, p := range []*windows.LazyProc{procVirtualAlloc2, procMapViewOfFile3, procUnmapViewOfFile2} {
		if p.Find() != nil {
			return errNoPlaceholders
		}
	}
	return nil
}

// virtualAlloc2 calls VirtualAlloc2 for this process.
func virtualAlloc2(addr uintptr, size int, typ, prot uint32) (uintptr, error) {
	if err := placeholdersMissing(); err != nil {
		return 0, err
	}
	r, _, err := procVirtualAlloc2.Call(uintptr(windows.CurrentProcess()), addr, uintptr(size), uintptr(typ), uintptr(prot), 0, 0)
	if r == 0 {
		return 0, errnoErr(err)
	}
	return r, nil
}

// mapViewOfFile3 maps size bytes of the section from off at addr, which
// must be a placeholder of exactly that size.
func mapViewOfFile3(section windows.Handle, addr uintptr, off int64, size int, prot uint32) (uintptr, error) {
	if err := placeholdersMissing(); err != nil {
		return 0, err
	}
	r, _, err := procMapViewOfFile3.Call(uintptr(section), uintptr(windows.CurrentProcess()), addr, uintptr(off), uintptr(size),
		memReplacePlaceholder, uintptr(prot), 0, 0)
	if r == 0 {
		return 0, errnoErr(err)
	}
	return r, nil
}

var procMapViewOfFileEx = windows.NewLazySystemDLL("kernel32.dll").NewProc("MapViewOfFileEx")

// mapViewOfFileEx maps size bytes of the section from off at addr, which
// must be free, outside any placeholder.
func mapViewOfFileEx(section windows.Handle, access uint32, off int64, size int, addr uintptr) (uintptr, error) {
	r, _, err := procMapViewOfFileEx.Call(uintptr(section), uintptr(access), uintptr(off>>32), uintptr(uint32(off)), uintptr(size), addr)
	if r == 0 {
		return 0, errnoErr(err)
	}
	return r, nil
}

// unmapToPlaceholder unmaps the view at addr and leaves a placeholder of
// its size there.
func unmapToPlaceholder(addr uintptr) error {
	r, _, err := procUnmapViewOfFile2.Call(uintptr(windows.CurrentProcess()), addr, memPreservePlaceholder)
	if r == 0 {
		return errnoErr(err)
	}
	return nil
}

// splitPlaceholder makes [addr, addr+size), the start of a placeholder,
// a placeholder of its own. It does nothing when the placeholder is of
// that size already.
func splitPlaceholder(addr uintptr, size int) error {
	err := windows.VirtualFree(addr, uintptr(size), memRelease|memPreservePlaceholder)
	if err != nil && !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		return err
	}
	return nil
}

func errnoErr(err error) error {
	if e, ok := err.(syscall.Errno); ok && e == 0 {
		return syscall.EINVAL
	}
	return err
}

// newSection makes a file mapping object of f's first size bytes.
func newSection(f fileHandle, size int64, writable bool) (windows.Handle, error) {
	prot := uint32(pageReadOnly)
	if writable {
		prot = pageReadWrite
	}
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, prot, uint32(size>>32), uint32(size), nil)
	if err != nil {
		return 0, fmt.Errorf("CreateFileMapping %s (%d bytes): %w", f.Name(), size, noSpace(err))
	}
	return h, nil
}

type fileHandle interface {
	Fd() uintptr
	Name() string
}

// noSpace makes a full disk's Windows errors match syscall.ENOSPC, which
// the callers test for.
func noSpace(err error) error {
	if errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL) {
		return fmt.Errorf("%w (%w)", syscall.ENOSPC, err)
	}
	return err
}

// pointer turns an address the system returned (VirtualAlloc2, a view's
// base: memory outside Go's heap, which the garbage collector neither
// moves nor frees) into a pointer.
func pointer(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }
