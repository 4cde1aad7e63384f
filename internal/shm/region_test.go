package shm

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PopulateWrite faults in the pages its bytes touch, from an unaligned
// start (madvise refuses one: nothing would be faulted in). Pages around
// them may come in too, with a file system's large folios.
func TestPopulateWrite(t *testing.T) {
	page := os.Getpagesize()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(8 * page)); err != nil { // a hole: no page in memory
		t.Fatal(err)
	}
	r, err := Reserve(8 * page)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
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
