package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/offmap"
)

// TestCopyLarger: the answer to a full map: a larger copy holds every
// entry and takes more.
func TestCopyLarger(t *testing.T) {
	src := newMap(t, 1000, 8, 16)
	entries := sampleEntries(1000)
	for k, v := range special {
		entries[k] = v
	}
	m, err := offmap.Open(src, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stored := make(map[string]string)
	for k, v := range entries {
		if err := m.Put([]byte(k), []byte(v)); err == nil {
			stored[k] = v
		}
	}
	m.Close()
	if len(stored) < 900 {
		t.Fatalf("only %d entries fit", len(stored))
	}

	dst := filepath.Join(t.TempDir(), "big.map")
	out := ok(t, "copy", src, dst, "--entries", "5000")
	if !strings.Contains(out, "copied ") || !strings.Contains(out, "room for 5000 entries to start") {
		t.Errorf("copy printed %q", out)
	}
	ok(t, "verify", dst)
	sameContents(t, contents(t, dst), stored)
	sameContents(t, contents(t, src), stored) // the source is untouched

	// The copy keeps the source's other sizes and takes what did not fit.
	d, err := offmap.Open(dst, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	if st.Capacity != 5000 || st.AverageKeySize != 8 || st.AverageValueSize != 16 || st.MaxKeySize != 256 {
		t.Errorf("copy's layout: %+v", st)
	}
	for k, v := range entries {
		if err := d.Put([]byte(k), []byte(v)); err != nil {
			t.Fatalf("the larger copy is full too: %v", err)
		}
	}
	d.Close()
	fi, _ := os.Stat(src)
	if fd, _ := os.Stat(dst); fd.Mode().Perm() != fi.Mode().Perm() {
		t.Errorf("copy's mode %v, source's %v", fd.Mode(), fi.Mode())
	}
}

func TestCopyLayout(t *testing.T) {
	src := newMap(t, 1000, 8, 16, "--mode", "0644")
	fill(t, src, special)
	dst := filepath.Join(t.TempDir(), "new.map")
	ok(t, "copy", "--avg-value", "64", "--max-value", "4096", "--segments", "4", "--mode", "0600", src, dst)
	d, err := offmap.Open(dst, offmap.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	d.Close()
	if st.Capacity != 1000 || st.AverageValueSize != 64 || st.MaxValueSize != 4096 || st.Segments != 4 {
		t.Errorf("copy's layout: %+v", st)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
		t.Errorf("copy's mode %v", fi.Mode())
	}
	sameContents(t, contents(t, dst), special)
}

// TestCopyCompacts: a map that grew and then lost most of its entries
// copies into a map that starts at the size it needs, without the space
// growth left unused; a copy declared for fewer entries than it receives
// grows.
func TestCopyCompacts(t *testing.T) {
	src := newMap(t, 100, 8, 16)
	entries := sampleEntries(3000)
	fill(t, src, entries)
	m, err := offmap.Open(src, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range entries {
		if len(entries) == 1000 {
			break
		}
		if _, err := m.Delete([]byte(k)); err != nil {
			t.Fatal(err)
		}
		delete(entries, k)
	}
	before := m.Stats()
	m.Close()
	if before.TablesGrown == 0 || before.UnusedBytes == 0 {
		t.Fatalf("the source did not grow: %+v", before)
	}

	stats := func(path string) offmap.Stats {
		m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return m.Stats()
	}
	compact := filepath.Join(t.TempDir(), "compact.map")
	ok(t, "copy", "--entries", "1000", src, compact)
	sameContents(t, contents(t, compact), entries)
	st := stats(compact)
	if st.TablesGrown != 0 || st.ExtentsAdded != 0 || st.UnusedBytes != 0 || st.FileSize >= before.FileSize {
		t.Errorf("the copy for 1000 entries: %d bytes (source %d), %d tables grown, %d extents added, %d bytes unused",
			st.FileSize, before.FileSize, st.TablesGrown, st.ExtentsAdded, st.UnusedBytes)
	}

	grown := filepath.Join(t.TempDir(), "grown.map")
	out := ok(t, "copy", "--entries", "50", src, grown)
	if !strings.Contains(out, "copied 1000 entries") || !strings.Contains(out, "room for 50 entries to start") {
		t.Errorf("copy printed %q", out)
	}
	ok(t, "verify", grown)
	sameContents(t, contents(t, grown), entries)
	if st := stats(grown); st.Capacity != 50 || st.TablesGrown == 0 {
		t.Errorf("the copy for 50 entries: capacity %d, %d tables grown", st.Capacity, st.TablesGrown)
	}
}

func TestCopyErrors(t *testing.T) {
	src := newMap(t, 1000, 8, 16)
	fill(t, src, sampleEntries(500))
	dir := t.TempDir()

	// Too small: a map for 50 entries that may not grow past its
	// starting size. Nothing is left behind.
	dst := filepath.Join(dir, "small.map")
	fails(t, 2, "is too small after", "copy", "--entries", "50", "--max-file-size", "65536", src, dst)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("a failed copy left %v", names)
	}
	r := fails(t, 2, "give a larger --max-file-size", "copy", "--entries", "50", "--max-file-size", "65536", src, dst)
	if !strings.Contains(r.stderr, "map is full") {
		t.Errorf("copy into a full map: %q", r.stderr)
	}
	fails(t, 2, "MaxFileSize 1000 is below the 65536 bytes the map starts with", "copy", "--entries", "50", "--max-file-size", "1000", src, dst)
	fails(t, 2, "--max-file-size must be positive", "copy", "--max-file-size", "0", src, dst)
	// Entries over the new limits.
	fill(t, src, map[string]string{"big": strings.Repeat("v", 200)})
	fails(t, 2, "give a larger --max-key or --max-value", "copy", "--max-value", "100", "--avg-value", "16", src, dst)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("a failed copy left %v", names)
	}
	// Never overwrites.
	if err := os.WriteFile(dst, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	fails(t, 2, "already exists", "copy", src, dst)
	if b, _ := os.ReadFile(dst); string(b) != "precious" {
		t.Fatal("copy overwrote an existing file")
	}
	fails(t, 2, "no such file", "copy", filepath.Join(dir, "missing.map"), filepath.Join(dir, "out.map"))
	fails(t, 2, "wrong number of arguments", "copy", src)
}
