package shm

import (
	"os"
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
	if got := v.Bytes(); len(got) != page || got[0] != 7 {
		t.Fatalf("view of %d bytes starting %d", len(got), got[0])
	}
	if b, err = r.Extend(f, 3*page, true); err != nil {
		t.Fatal(err)
	}
	v.Set(b)
	got := v.Bytes()
	if len(got) != 3*page || &got[0] != &b[0] {
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
