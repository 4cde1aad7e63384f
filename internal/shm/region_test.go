//go:build unix

package shm

import (
	"os"
	"testing"
	"unsafe"

	"github.com/offmap/offmap/internal/reexec"

	"golang.org/x/sys/unix"
)

// PopulateWrite faults in the pages its bytes touch, from an unaligned
// start (madvise refuses one: nothing would be faulted in). Pages around
// them may come in too, with a file system's large folios.
func TestPopulateWrite(t *testing.T) {
	if reexec.Emulated() && !Portable {
		t.Skip("qemu-user takes madvise's advice as a hint and ignores it")
	}
	page := os.Getpagesize()
	f, r := reservedFile(t, 8*page, 8*page) // the file a hole: no page in memory
	mem, err := r.Extend(f, 8*page, true)
	if err != nil {
		t.Fatal(err)
	}
	PopulateWrite(mem[2*page+100 : 4*page+1]) // pages 2, 3 and 4
	resident := make([]byte, 8)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&resident[0]))); e != 0 {
		t.Fatal(e)
	}
	for i := 2; i <= 4; i++ {
		if resident[i]&1 == 0 {
			t.Errorf("page %d not in memory after PopulateWrite", i)
		}
	}
	PopulateWrite(nil) // nothing, no fault
}

// TestReleaseGivesBackTheReservation: a released region keeps only the
// addresses it had mapped (as zero pages); the reserved rest is unmapped,
// so that the addresses can serve other mappings.
func TestReleaseGivesBackTheReservation(t *testing.T) {
	page := os.Getpagesize()
	f, _ := reservedFile(t, page, page)
	r, err := Reserve(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := r.Extend(f, page, true)
	if err != nil {
		t.Fatal(err)
	}
	mem[0] = 1
	base := unsafe.Pointer(&mem[0])
	mapped := func(off int) bool { // mincore fails with ENOMEM where nothing is mapped
		var v [1]byte
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Add(base, off)), uintptr(page), uintptr(unsafe.Pointer(&v[0])))
		return e == 0
	}
	if !mapped(0) || !mapped(1<<29) {
		// qemu-user answers mincore from its own page table, where a
		// reserved PROT_NONE page is not there.
		t.Skip("mincore does not see the reservation here: nothing to compare")
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if mem[0] != 0 {
		t.Fatal("a released region still shows the file")
	}
	if !mapped(0) {
		t.Fatal("the mapped prefix was given back: a stale pointer would fault")
	}
	if mapped(page) || mapped(1<<29) || mapped(1<<30-page) {
		t.Fatal("the reserved rest is still mapped")
	}
}
