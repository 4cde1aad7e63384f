package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestStat(t *testing.T) {
	path := newMap(t, 1000, 8, 16)
	fill(t, path, sampleEntries(300))
	out := ok(t, "stat", path)
	for _, want := range []string{
		"format         version 1",
		"capacity       1000 entries",
		"entries        300 (30.0% of capacity), 0 detached",
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
	if st.FormatVersion != 1 || st.Capacity != 1000 || st.Entries != 300 || st.Segments != 15 ||
		len(st.PerSegment) != 15 || st.MaxKeySize != 256 || st.FileSize == 0 || st.Created.IsZero() {
		t.Errorf("stat --json: %+v", st)
	}
	sum := 0
	for i, s := range st.PerSegment {
		sum += s.Entries
		if s.Index != i || s.EntryFill != float64(s.Entries)/float64(st.MaxPerSegment) || s.LockHolder != 0 {
			t.Errorf("segment %d: %+v", i, s)
		}
	}
	if sum != 300 {
		t.Errorf("segments hold %d entries, want 300", sum)
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
	missing := filepath.Join(t.TempDir(), "missing.map")
	fails(t, 2, "no such file", "stat", missing)
	fails(t, 2, "wrong number of arguments", "stat")
}
