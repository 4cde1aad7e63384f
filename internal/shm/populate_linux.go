//go:build linux && !offmap_portable

package shm

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PopulateWrite faults in the pages of b, a part of a writable shared
// mapping, for writing (MADV_POPULATE_WRITE, Linux 5.14 or later), so
// that the first writes there do not each take a page fault. It is only a
// hint: errors are ignored. It needs no lock against Extend, which never
// moves or unmaps what is mapped; the caller keeps b's mapping alive.
func PopulateWrite(b []byte) {
	page := os.Getpagesize()
	if len(b) == 0 {
		return
	}
	// madvise wants a page-aligned start.
	off := int(uintptr(unsafe.Pointer(&b[0])) % uintptr(page))
	b = unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&b[0]), -off)), len(b)+off)
	unix.Madvise(b, unix.MADV_POPULATE_WRITE)
}
