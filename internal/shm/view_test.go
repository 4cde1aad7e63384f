package shm

import (
	"os"
	"path/filepath"
	"testing"
)

// A View follows a Region's prefix as it grows, at the same address.
func TestViewFollowsRegion(t *testing.T) {
	page := os.Getpagesize()
	f, r := reservedFile(t, 3*page, 4*page)
	var v View
	if v.Bytes() != nil {
		t.Fatal("a View that was never set has bytes")
	}
	b, err := r.Extend(f, page, true)
	if err != nil {
		t.Fatal(err)
	}
	v.Set(b)
	b[0] = 7
	// Windows maps a whole 64 KiB, or to the end of the reservation.
	if got := v.Bytes(); len(got) != len(b) || len(got) < page || got[0] != 7 {
		t.Fatalf("view of %d bytes starting %d", len(got), got[0])
	}
	if b, err = r.Extend(f, 3*page, true); err != nil {
		t.Fatal(err)
	}
	v.Set(b)
	got := v.Bytes()
	if len(got) != len(b) || len(got) < 3*page || &got[0] != &b[0] {
		t.Fatalf("view of %d bytes after growth to %d, or moved", len(got), 3*page)
	}
	got[2*page] = 9
	if b[2*page] != 9 {
		t.Fatal("the view and the region disagree")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Set with a shorter prefix did not panic")
		}
	}()
	v.Set(b[:page])
}

// reservedFile returns a file of size bytes (a hole) and a Region of
// reserve bytes to map it into, both released when the test ends.
func reservedFile(t *testing.T, size, reserve int) (*os.File, *Region) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	r, err := Reserve(reserve)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Unmap() })
	return f, r
}
