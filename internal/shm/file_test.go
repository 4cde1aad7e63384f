package shm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Preallocate only ever adds storage past the end: it never shrinks a
// file, nor writes over what other processes may have put in it.
func TestPreallocateNeverShrinksNorOverwrites(t *testing.T) {
	page := os.Getpagesize()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte{0xa5}, 3*page)
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := Preallocate(f, int64(page)); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Stat(); st.Size() != int64(3*page) {
		t.Fatalf("Preallocate to less than the size left %d bytes, want %d", st.Size(), 3*page)
	}
	if err := Preallocate(f, int64(5*page)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5*page)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:3*page], data) || !bytes.Equal(got[3*page:], make([]byte, 2*page)) {
		t.Fatal("Preallocate changed the file's bytes")
	}
	if !allocated(f) {
		t.Fatal("the preallocated file has holes")
	}
}

// Mapping a sparse file gives its holes storage first and keeps its data,
// read-only mappings included.
func TestMapFillsHoles(t *testing.T) {
	page := os.Getpagesize()
	for _, writable := range []bool{true, false} {
		p := filepath.Join(t.TempDir(), "sparse")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(int64(16 * page))
		f.WriteAt([]byte("first"), 0)
		f.WriteAt([]byte("middle"), int64(9*page+100))
		f.Close()
		f, _, err = OpenFile(p, !writable)
		if err != nil {
			t.Fatal(err)
		}
		if allocated(f) {
			t.Skip("the file system gave the sparse file all its blocks")
		}
		m, err := Map(f, 0, 16*page, writable)
		if err != nil {
			t.Fatal(err)
		}
		b := m.Bytes()
		if string(b[:5]) != "first" || string(b[9*page+100:9*page+106]) != "middle" {
			t.Fatalf("writable %v: the data moved", writable)
		}
		if !allocated(f) {
			t.Fatalf("writable %v: holes left after Map", writable)
		}
		m.Unmap()
		f.Close()
	}
}
