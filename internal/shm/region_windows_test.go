package shm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// A reader's Region follows a file that writers grow, though a writer
// claims space (the file grows past a 64 KiB boundary) before it maps and
// pads it: the reader maps what lies below the boundaries the file holds,
// returns a shorter prefix meanwhile, and maps on once the writer padded.
func TestRegionReaderFollowsPadding(t *testing.T) {
	const granule = allocationGranularity
	path := filepath.Join(t.TempDir(), "f")
	wf, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	if err := wf.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	w := reserve(t, 1<<20)
	b, err := w.Extend(wf, 4096, true)
	if err != nil || len(b) != granule {
		t.Fatalf("writer: %d bytes, %v; want %d", len(b), err, granule)
	}
	if size := fileSize(t, wf); size != granule {
		t.Fatalf("the writer padded the file to %d bytes, want %d", size, granule)
	}

	rf, _, err := OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	r := reserve(t, 1<<20)
	if b, err := r.Extend(rf, granule, false); err != nil || len(b) != granule {
		t.Fatalf("reader: %d bytes, %v", len(b), err)
	}

	// A claim that no writer has mapped yet: the file ends past the
	// boundary, unpadded.
	claimedEnd := int64(granule + 128)
	if _, err := wf.WriteAt([]byte{0}, claimedEnd-1); err != nil {
		t.Fatal(err)
	}
	want := Pad(int(claimedEnd), os.Getpagesize())
	if b, err := r.Extend(rf, want, false); err != nil || len(b) != granule {
		t.Fatalf("reader before the writer mapped the claim: %d bytes, %v; want %d and no error", len(b), err, granule)
	}

	b, err = w.Extend(wf, want, true)
	if err != nil || len(b) != 2*granule {
		t.Fatalf("writer: %d bytes, %v; want %d", len(b), err, 2*granule)
	}
	b[granule+100] = 42
	got, err := r.Extend(rf, want, false)
	if err != nil || len(got) != 2*granule {
		t.Fatalf("reader after the writer padded: %d bytes, %v; want %d", len(got), err, 2*granule)
	}
	if got[granule+100] != 42 {
		t.Fatal("the reader does not see the writer's byte")
	}
}

// A first view of a file whose end lies between boundaries (made on
// another system) maps all of it, read-only; only reopening maps growth.
func TestRegionReaderOfForeignFile(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, allocationGranularity+page), 0o644); err != nil {
		t.Fatal(err)
	}
	rf, _, err := OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	r := reserve(t, 1<<20)
	if b, err := r.Extend(rf, allocationGranularity+page, false); err != nil || len(b) != allocationGranularity+page {
		t.Fatalf("first view: %d bytes, %v", len(b), err)
	}
	if _, err := r.Extend(rf, allocationGranularity+2*page, false); !errors.Is(err, errUnalignedEnd) {
		t.Fatalf("growth past an unaligned end: %v, want errUnalignedEnd", err)
	}
}

// A writer's view that would pass the reservation ends at it, and the
// file is padded to it: the view is the last.
func TestRegionWriterEndsAtReservation(t *testing.T) {
	page := os.Getpagesize()
	reserved := allocationGranularity + 2*page
	f, r := reservedFile(t, page, reserved)
	b, err := r.Extend(f, page, true)
	if err != nil || len(b) != allocationGranularity {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	if err := f.Truncate(int64(allocationGranularity + page)); err != nil {
		t.Fatal(err)
	}
	if b, err = r.Extend(f, allocationGranularity+page, true); err != nil || len(b) != reserved {
		t.Fatalf("%d bytes, %v; want the whole reservation, %d", len(b), err, reserved)
	}
	if size := fileSize(t, f); size != int64(reserved) {
		t.Fatalf("file of %d bytes, want %d", size, reserved)
	}
}

func reserve(t *testing.T, size int) *Region {
	t.Helper()
	r, err := Reserve(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Unmap() })
	return r
}

func fileSize(t *testing.T, f *os.File) int64 {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// ExtendTail maps a file's end that lies between 64 KiB boundaries (and
// inside a page) as the region's last view, at the prefix's end; Release
// then leaves zeros at every address, and Unmap gives the range back.
func TestRegionExtendTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	size := 2*allocationGranularity + 5000
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i % 251)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, err := OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := reserve(t, 1<<20)
	b, err := r.Extend(f, allocationGranularity, false)
	if err != nil || len(b) != 2*allocationGranularity {
		t.Fatalf("Extend: %d bytes, %v", len(b), err)
	}
	if b, err = r.ExtendTail(f); err != nil || len(b) != size {
		t.Fatalf("ExtendTail: %d bytes, %v; want %d", len(b), err, size)
	}
	if !bytes.Equal(b, data) {
		t.Fatal("the mapped bytes differ from the file's")
	}
	if _, err := r.Extend(f, Pad(size, os.Getpagesize())+os.Getpagesize(), false); !errors.Is(err, errUnalignedEnd) {
		t.Fatalf("Extend after the tail: %v, want errUnalignedEnd", err)
	}
	if again, err := r.ExtendTail(f); err != nil || len(again) != size {
		t.Fatalf("ExtendTail again: %d bytes, %v", len(again), err)
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if b[size-1] != 0 || b[0] != 0 || b[allocationGranularity] != 0 {
		t.Fatal("released addresses do not read zeros")
	}
}

// Map of a file that ends inside a page, which a view in a placeholder
// cannot reach, maps it as a plain view; Release leaves zeros there.
func TestMapFileEndingInsideAPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte{7}, 20416) // a version-1 map's length
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, writable := range []bool{false, true} {
		f, _, err := OpenFile(path, !writable)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Map(f, 0, len(data), writable)
		if err != nil {
			t.Fatalf("Map (writable %v): %v", writable, err)
		}
		b := m.Bytes()
		if !bytes.Equal(b, data) {
			t.Fatalf("Map (writable %v): the bytes differ from the file's", writable)
		}
		if err := m.Release(); err != nil {
			t.Fatal(err)
		}
		if b[0] != 0 || b[len(b)-1] != 0 {
			t.Fatalf("Release (writable %v) left %d, %d", writable, b[0], b[len(b)-1])
		}
		if err := m.Unmap(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if st, err := os.Stat(path); err != nil || st.Size() != int64(len(data)) {
			t.Fatalf("the file changed length: %v %v", st.Size(), err)
		}
	}
}

// Grow past the end of a file extends it to the next 64 KiB boundary in
// one step, so that a reader never sees an end between boundaries that a
// writer made (it would take the file for one made elsewhere, and map its
// tail as its last view); a range inside the file gets zeros and nothing
// past it changes. Goroutines growing one file at once leave every size
// they see on a boundary.
func TestGrowEndsOnBoundary(t *testing.T) {
	const granule = allocationGranularity
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Grow(f, 0, 100); err != nil {
		t.Fatal(err)
	}
	if size := fileSize(t, f); size != granule {
		t.Fatalf("after a claim of 100 bytes the file is %d bytes, want %d", size, granule)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{7}, granule), 0); err != nil {
		t.Fatal(err)
	}
	if err := Grow(f, 64, 64); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, granule)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	for i, c := range got {
		if want := byte(7 * (1 - b2i(i >= 64 && i < 128))); c != want {
			t.Fatalf("byte %d is %d after Grow(64, 64), want %d", i, c, want)
		}
	}
	var next atomic.Int64
	next.Store(granule)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				off := next.Add(4096) - 4096
				if err := Grow(f, off, 4096); err != nil {
					t.Error(err)
					return
				}
				st, err := f.Stat()
				if err != nil {
					t.Error(err)
					return
				}
				if size := st.Size(); size%granule != 0 || size < off+4096 {
					bad.Store(size)
				}
			}
		}()
	}
	wg.Wait()
	if size := bad.Load(); size != 0 {
		t.Fatalf("a goroutine saw the file end at %d bytes, not on a 64 KiB boundary past its claim", size)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
