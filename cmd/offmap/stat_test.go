package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/internal/cliargs"
)

func TestStat(t *testing.T) {
	path := newMap(t, 1000, 8, 16)
	fill(t, path, sampleEntries(300))
	out := ok(t, "stat", path)
	for _, want := range []string{
		"format         version 3, created ",
		"file size      131072 bytes (128.0 KiB) now, 128.0 KiB when created, at most 1.0 GiB",
		"growth         0 slot tables grown, 0 extents added\n",
		"events         0 lock takeovers of dead holders, 0 segments repaired, 0 expired entries removed\n",
		"starting room  1000 entries when created (the map grows past them)\n",
		"entries        300, 0 detached\n",
		"keys           average 8, at most 256 bytes",
		"segments       15, each",
		"locks          none held",
		"segment  entries  detached",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stat lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out[strings.Index(out, "segment  entries"):], "\n") - 1; got != 15 {
		t.Errorf("stat lists %d segments, want 15:\n%s", got, out)
	}

	var st statJSON
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", path)), &st); err != nil {
		t.Fatal(err)
	}
	if st.FormatVersion != 3 || st.Capacity != 1000 || st.Entries != 300 || st.Segments != 15 ||
		len(st.PerSegment) != 15 || st.MaxKeySize != 256 || st.FileSize != 131072 || st.StartFileSize != 131072 ||
		st.MaxFileSize != 1<<30 || st.TablesGrown != 0 || st.ExtentsAdded != 0 || st.UnusedBytes != 0 || st.Created.IsZero() {
		t.Errorf("stat --json: %+v", st)
	}
	sum := 0
	for i, s := range st.PerSegment {
		sum += s.Entries
		if s.Index != i || s.Slots != st.SlotsPerSegment || s.MaxEntries < st.MaxPerSegment || s.Extents != 1 ||
			s.EntrySpace != int64(st.ChunksPerSegment*st.ChunkSize) || s.LockHolder != 0 ||
			s.EntryFill != float64(s.Entries)/float64(s.MaxEntries) || s.SpaceFill != float64(s.BytesUsed)/float64(s.EntrySpace) {
			t.Errorf("segment %d: %+v", i, s)
		}
	}
	if sum != 300 {
		t.Errorf("segments hold %d entries, want 300", sum)
	}
}

// TestStatGrowth: a map made for 100 entries that takes 5,000 shows how
// it grew.
func TestStatGrowth(t *testing.T) {
	path := newMap(t, 100, 8, 16)
	fill(t, path, sampleEntries(5000))
	var st statJSON
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", path)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Entries != 5000 || st.Capacity != 100 || st.TablesGrown == 0 || st.ExtentsAdded == 0 ||
		st.FileSize <= st.StartFileSize || st.FileSize > st.MaxFileSize || st.UnusedBytes <= 0 {
		t.Fatalf("stat --json after growth: %+v", st)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != st.FileSize {
		t.Errorf("the file has %d bytes, stat says %d (%v)", fi.Size(), st.FileSize, err)
	}
	var space int64
	tables, extents := 0, 0
	for _, s := range st.PerSegment {
		space += s.EntrySpace
		if s.Slots > st.SlotsPerSegment {
			tables++
		}
		extents += s.Extents - 1
		if s.Entries+s.Detached > s.MaxEntries || s.BytesUsed > s.EntrySpace || s.EntryFill > 1 || s.SpaceFill > 1 {
			t.Errorf("segment %d: %+v", s.Index, s)
		}
	}
	if space != st.EntrySpace || tables == 0 || extents != st.ExtentsAdded {
		t.Errorf("segments: %d bytes of entry space (map: %d), %d grew tables, %d extents added (map: %d)",
			space, st.EntrySpace, tables, extents, st.ExtentsAdded)
	}

	// One segment: each table it grows out of is freed next to the one
	// before, and none fits the next, twice as large.
	if st.ReusableBytes == 0 || st.ReusableBytes > st.UnusedBytes || st.Reused != 0 {
		t.Errorf("%d of %d unused bytes reusable, %d growth steps reused space", st.ReusableBytes, st.UnusedBytes, st.Reused)
	}
	out := ok(t, "stat", path)
	for _, want := range []string{
		fmt.Sprintf("file size      %d bytes (%s) now, %s when created, at most %s\n",
			st.FileSize, cliargs.FormatSize(st.FileSize), cliargs.FormatSize(st.StartFileSize), cliargs.FormatSize(st.MaxFileSize)),
		fmt.Sprintf("growth         %d slot tables grown, %d extents added, %d bytes (%s) unused ('offmap copy' reclaims it), of which growth reuses %s first\n",
			st.TablesGrown, st.ExtentsAdded, st.UnusedBytes, cliargs.FormatSize(st.UnusedBytes), cliargs.FormatSize(st.ReusableBytes)),
		"entries        5000, 0 detached\n",
		"segment  entries  detached    slots  max entries  entry fill  extents  entry space",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stat lacks %q:\n%s", want, out)
		}
	}
}

func TestStatManySegments(t *testing.T) {
	path := newMap(t, 100000, 8, 8)
	out := ok(t, "stat", path)
	if !strings.Contains(out, "segments       64,") || !strings.Contains(out, fmt.Sprintf("%7d  ", 63)) {
		t.Errorf("stat of 64 segments should list them all:\n%s", out)
	}
	path = newMap(t, 200000, 8, 8)
	out = ok(t, "stat", path)
	if strings.Contains(out, "segment  entries") || !strings.Contains(out, "--segments lists all 128 segments") {
		t.Errorf("stat of 128 segments should summarize:\n%s", out)
	}
	out = ok(t, "stat", "--segments", path)
	if !strings.Contains(out, fmt.Sprintf("%7d  ", 127)) {
		t.Errorf("stat --segments does not list segment 127:\n%s", out)
	}
}

func TestStatErrors(t *testing.T) {
	fails(t, 2, "format version 1, from before maps could grow; 'offmap upgrade FILE'", "stat", v1Map(t))
	missing := filepath.Join(t.TempDir(), "missing.map")
	fails(t, 2, "no such file", "stat", missing)
	fails(t, 2, "wrong number of arguments", "stat")
}

// TestStatEvents: stat shows the header's event counters (offsets 320,
// 328, 336), in text and JSON.
func TestStatEvents(t *testing.T) {
	path := newMap(t, 1000, 8, 16)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []byte{3, 5, 9} {
		if _, err := f.WriteAt([]byte{n, 1, 0, 0, 0, 0, 0, 0}, 320+8*int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	out := ok(t, "stat", path)
	if want := "events         259 lock takeovers of dead holders, 261 segments repaired, 265 expired entries removed\n"; !strings.Contains(out, want) {
		t.Errorf("stat lacks %q:\n%s", want, out)
	}
	var st statJSON
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", path)), &st); err != nil {
		t.Fatal(err)
	}
	if st.LockTakeovers != 259 || st.Repairs != 261 || st.ExpiredRemoved != 265 {
		t.Errorf("stat --json: %d takeovers, %d repairs, %d expired removed", st.LockTakeovers, st.Repairs, st.ExpiredRemoved)
	}
	// The counters are not reserved bytes: verify passes.
	ok(t, "verify", path)
}
