//go:build darwin || windows || (linux && offmap_portable)

package shm

import (
	"os"
	"unsafe"
)

// PopulateWrite faults in the pages of b, a part of a writable shared
// mapping, for writing, so that the first writes there do not each take a
// page fault. It is only a hint. It needs no lock against Extend, which
// never moves or unmaps what is mapped; the caller keeps b's mapping
// alive.
//
// Without MADV_POPULATE_WRITE (Linux only) it writes each page itself: an
// atomic add of zero to one word per page, which takes the write fault
// and changes no byte, whatever other processes write there at the same
// instant. It costs a fault per page in this thread instead of one system
// call for the range. The caller's file has storage behind b (Preallocate),
// so the faults need no new blocks.
func PopulateWrite(b []byte) {
	if len(b) < 4 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	// The first 4-aligned word in b, then the first word of each page.
	for off := int((4 - start%4) % 4); off+4 <= len(b); {
		U32(b, off).Add(0)
		next := (start + uintptr(off) + page) &^ (page - 1)
		off = int(next - start)
	}
}
