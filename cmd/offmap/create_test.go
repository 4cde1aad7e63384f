package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/offmap"
)

func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.map")
	out := ok(t, "create", path, "--entries", "5000", "--avg-key", "16", "--avg-value", "8",
		"--max-value", "1000", "--segments", "8", "--mode", "0640")
	if !strings.Contains(out, "room for 5000 entries to start, 8 segments") {
		t.Errorf("create printed %q", out)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %o, want 640", fi.Mode().Perm())
	}
	m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	m.Close()
	if st.Capacity != 5000 || st.AverageKeySize != 16 || st.AverageValueSize != 8 ||
		st.MaxValueSize != 1000 || st.Segments != 8 || st.Len != 0 {
		t.Errorf("created %+v", st)
	}
	ok(t, "verify", path)

	// Flags after, before or between the arguments.
	ok(t, "create", "--entries=10", filepath.Join(t.TempDir(), "a.map"), "--avg-key", "4", "--avg-value=4")
}

// TestCreateDefaults: create with no size flags makes a small map of the
// library's defaults, which then grows past its starting room.
func TestCreateDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.map")
	out := ok(t, "create", path)
	if want := "created " + path + ": room for 1024 entries to start, 16 segments, 384.0 KiB (grows to at most "; !strings.HasPrefix(out, want) {
		t.Errorf("create printed %q, want %q...", out, want)
	}
	st := statsOf(t, path)
	if st.Capacity != 1024 || st.AverageKeySize != 32 || st.AverageValueSize != 64 ||
		st.MaxKeySize != 256 || st.MaxValueSize != 4096 || st.Segments != 16 || st.Len != 0 {
		t.Fatalf("created %+v", st)
	}
	// Some flags given, the others defaulted.
	other := filepath.Join(t.TempDir(), "other.map")
	ok(t, "create", other, "--entries", "50000")
	if st := statsOf(t, other); st.Capacity != 50000 || st.AverageKeySize != 32 || st.AverageValueSize != 64 || st.MaxValueSize != 4096 {
		t.Errorf("create --entries 50000 made %+v", st)
	}

	// It takes 5,000 entries, 5 times its starting room, and a value of
	// 4096 bytes but not one of 4097.
	var in strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&in, "%q %q\n", fmt.Sprintf("client-%06d@example.com", i), fmt.Sprintf("session %d of this client", i))
	}
	r := offmapRun(t, strings.NewReader(in.String()), "load", "--quiet", path)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "loaded 5000 entries into "+path+": 5000 entries now") {
		t.Fatalf("load: %s", r)
	}
	ok(t, "put", path, "big", strings.Repeat("v", 4096))
	fails(t, 2, "value too large", "put", path, "bigger", strings.Repeat("v", 4097))
	ok(t, "verify", path)
	if st := statsOf(t, path); st.Len != 5001 || st.TablesGrown == 0 {
		t.Errorf("after the load: %d entries, %d tables grown", st.Len, st.TablesGrown)
	}
	if out := ok(t, "get", path, "client-004999@example.com"); out != "session 4999 of this client\n" {
		t.Errorf("get printed %q", out)
	}
}

func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.map")
	fails(t, 2, "--entries must be positive", "create", path, "--entries", "0", "--avg-key", "4", "--avg-value", "4")
	fails(t, 2, "--avg-key must be positive", "create", path, "--entries", "10", "--avg-key", "0", "--avg-value", "4")
	fails(t, 2, `invalid value "-4" for --avg-key: negative`, "create", path, "--entries", "10", "--avg-key", "-4", "--avg-value", "4")
	fails(t, 2, `invalid value "many" for --entries`, "create", path, "--entries", "many", "--avg-key", "4", "--avg-value", "4")
	fails(t, 2, "not an octal permission", "create", path, "--entries", "10", "--avg-key", "4", "--avg-value", "4", "--mode", "rw")
	fails(t, 2, "unknown flag --size", "create", path, "--size", "10")
	fails(t, 2, "wrong number of arguments", "create", "--entries", "10", "--avg-key", "4", "--avg-value", "4")
	fails(t, 2, "invalid options: MaxKeySize 70000 exceeds 65535", "create", path, "--entries", "10", "--avg-key", "4", "--avg-value", "4", "--max-key", "70000")
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a failed create left a file")
	}
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	fails(t, 2, "already exists", "create", path, "--entries", "10", "--avg-key", "4", "--avg-value", "4")
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("create overwrote an existing file")
	}
}

// TestCreateChecksums: --checksums makes a map whose entries carry a
// checksum; stat says so, and copy keeps it.
func TestCreateChecksums(t *testing.T) {
	path := newMap(t, 100, 8, 8, "--checksums")
	ok(t, "put", path, "k", "v")
	var st statJSON
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", path)), &st); err != nil || !st.ChecksumEntries {
		t.Fatalf("stat --json: checksum_entries %v, %v", st.ChecksumEntries, err)
	}
	if out := ok(t, "stat", path); !strings.Contains(out, "entries checksummed") {
		t.Errorf("stat does not say the entries are checksummed:\n%s", out)
	}
	dst := filepath.Join(t.TempDir(), "copy.map")
	ok(t, "copy", path, dst)
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", dst)), &st); err != nil || !st.ChecksumEntries {
		t.Fatalf("the copy lost its checksums: %v, %v", st.ChecksumEntries, err)
	}
	plain := newMap(t, 100, 8, 8)
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", plain)), &st); err != nil || st.ChecksumEntries {
		t.Fatalf("a map made without --checksums: %v, %v", st.ChecksumEntries, err)
	}
}

// TestTTLAndSweep: a map made with --ttl: stat counts the entries whose
// time has passed, and sweep deletes them.
func TestTTLAndSweep(t *testing.T) {
	path := newMap(t, 100, 8, 8, "--ttl", "1ns")
	for i := range 5 {
		ok(t, "put", path, fmt.Sprint("k", i), "v")
	}
	// Each entry expired a nanosecond after it was written.
	var st statJSON
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", path)), &st); err != nil || !st.Expiring || st.TTL != 1 || st.Expired != 5 {
		t.Fatalf("stat --json: %+v, %v", st, err)
	}
	if out := ok(t, "stat", path); !strings.Contains(out, "5 entries expired, awaiting 'offmap sweep'") {
		t.Errorf("stat:\n%s", out)
	}
	fails(t, 1, "not found", "get", path, "k1")
	if out := ok(t, "sweep", path); !strings.Contains(out, "5 expired entries deleted, 0 entries left") {
		t.Errorf("sweep: %q", out)
	}
}

// TestCreateSizeUnits: the size flags take binary and decimal units and
// the counts take exponents, and create prints sizes in binary units.
func TestCreateSizeUnits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "units.map")
	out := ok(t, "create", path, "--entries", "2e3", "--avg-key", "16", "--avg-value", "0.5KiB",
		"--max-value", "4kB", "--max-file-size", "256GiB")
	if !strings.Contains(out, "room for 2000 entries to start") || !strings.HasSuffix(out, "(grows to at most 256.0 GiB)\n") {
		t.Errorf("create printed %q", out)
	}
	st := statsOf(t, path)
	if st.Capacity != 2000 || st.AverageValueSize != 512 || st.MaxValueSize != 4000 || st.MaxFileSize != 256<<30 {
		t.Errorf("created %+v", st)
	}
	other := filepath.Join(t.TempDir(), "other.map")
	ok(t, "create", other, "--entries", "1_000", "--max-file-size", "1G")
	if st := statsOf(t, other); st.Capacity != 1000 || st.MaxFileSize != 1<<30 {
		t.Errorf("created %+v", st)
	}
	fails(t, 2, `invalid value "1.5" for --entries: not a whole number`, "create", filepath.Join(t.TempDir(), "x.map"), "--entries", "1.5")
	fails(t, 2, `invalid value "9EiB" for --max-file-size: too large`, "create", filepath.Join(t.TempDir(), "x.map"), "-max-file-size", "9EiB")
}

// TestCreateEvict: a map made with --evict takes any number of puts
// within its bound, and stat reports its counters.
func TestCreateEvict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.map")
	out := ok(t, "create", path, "--evict", "--entries", "100", "--segments", "1", "--avg-key", "8", "--avg-value", "8")
	if !strings.Contains(out, "a cache of at most 100 entries") {
		t.Errorf("create printed %q", out)
	}
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := m.Put(fmt.Append(nil, "k", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// A hit and a miss, counted by a process that may write the file;
	// offmap get reads read-only, which counts nothing.
	if _, err := m.Get([]byte("k999")); err != nil { // the last put
		t.Fatal(err)
	}
	if _, err := m.Get([]byte("k-never")); !errors.Is(err, offmap.ErrNotFound) {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ok(t, "get", path, "k999")
	fails(t, 1, "not found", "get", path, "k-never")
	var st statJSON
	if err := json.Unmarshal([]byte(ok(t, "stat", "--json", path)), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Evict || st.EvictBound != 100 || st.Entries != 100 || st.Evictions != 900 || st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stat --json: %+v", st)
	}
	if out := ok(t, "stat", path); !strings.Contains(out, "eviction       S3-FIFO, at most 100 entries") || !strings.Contains(out, "1 hits, 1 misses (50.0% hits), 900 evicted") {
		t.Errorf("stat:\n%s", out)
	}
	// offmap copy keeps it a cache, and says what a smaller one evicts.
	copied := filepath.Join(t.TempDir(), "copy.map")
	ok(t, "copy", path, copied)
	smaller := filepath.Join(t.TempDir(), "smaller.map")
	if out := ok(t, "copy", path, smaller, "--entries", "40"); !strings.Contains(out, "a cache of at most 40 entries, 1 segments") || !strings.Contains(out, "it holds 40 (60 evicted)") {
		t.Errorf("copy into a smaller cache printed %q", out)
	}
	if st := statsOf(t, copied); !st.Evict || st.EvictBound != 100 || st.Len != 100 {
		t.Fatalf("the copy: evict %v, bound %d, %d entries", st.Evict, st.EvictBound, st.Len)
	}
}
