package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/internal/shm"
)

// v1Map writes the library's version 1 test file (a map made for 200
// entries holding 136: "key-NNN" -> "value of key N" for N in [0, 150)
// but the multiples of 10, and "hits" -> 12345 as an int64) into a new
// directory and returns its path.
func v1Map(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "offmap", "testdata", "v1", "requests.offmap.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "requests.map")
	if err := os.WriteFile(path, b.Bytes(), 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUpgrade(t *testing.T) {
	path := v1Map(t)
	// Before: every command points at upgrade.
	fails(t, 2, "format version 1, from before maps could grow; 'offmap upgrade FILE'", "get", path, "hits")
	r := fails(t, 1, "'offmap upgrade FILE'", "verify", path)
	if r.stdout != "" {
		t.Errorf("verify of a version 1 file printed %q", r.stdout)
	}

	out := ok(t, "upgrade", path)
	want := "upgraded " + path + " to format version 3: 136 entries copied, room for 200 entries to start, 3 segments, "
	if !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("upgrade printed %q, want %q...", out, want)
	}
	if names, _ := os.ReadDir(filepath.Dir(path)); len(names) != 1 {
		t.Errorf("upgrade left %v", names)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("upgraded file's mode %v, want 0640 as before", fi.Mode())
	}
	ok(t, "verify", path)
	if got := ok(t, "get", "--int64", path, "hits"); got != "12345\n" {
		t.Errorf("hits = %q", got)
	}
	got := contents(t, path)
	if len(got) != 136 || got["key-001"] != "value of key 1" || got["key-149"] != "value of key 149" {
		t.Errorf("upgraded map holds %d entries, key-001 %q, key-149 %q", len(got), got["key-001"], got["key-149"])
	}
	if _, present := got["key-010"]; present {
		t.Error("a deleted key came back")
	}
	if !strings.Contains(ok(t, "stat", path), "format         version 3,") {
		t.Error("stat does not show version 3")
	}

	// Again: nothing to do, and the file stays as it is.
	before, _ := os.ReadFile(path)
	if out := ok(t, "upgrade", path); out != path+": already format version 3; nothing to do\n" {
		t.Errorf("upgrade of an upgraded map printed %q", out)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Error("upgrade changed a current map")
	}
}

func TestUpgradeErrors(t *testing.T) {
	// In use: another process holds the map open (a shared flock, as
	// every process that opened it does).
	path := v1Map(t)
	before, _ := os.ReadFile(path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := shm.Flock(f, false, false); err != nil {
		t.Fatal(err)
	}
	fails(t, 2, "another process has the map open; upgrade it when no process uses it", "upgrade", path)
	f.Close()
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("a refused upgrade changed the file")
	}
	if names, _ := os.ReadDir(filepath.Dir(path)); len(names) != 1 {
		t.Errorf("a refused upgrade left %v", names)
	}

	// Damaged: the segments cut short.
	truncated := filepath.Join(t.TempDir(), "truncated.map")
	os.WriteFile(truncated, before[:len(before)-4096], 0o600)
	fails(t, 2, "truncated", "upgrade", truncated)
	// A slot word changed: its entry no longer hashes to it.
	garbled := filepath.Join(t.TempDir(), "garbled.map")
	b := bytes.Clone(before)
	slots := int(binary.LittleEndian.Uint64(b[88:])) // segment 0's slots start the segments
	for i := slots; i < slots+8*125; i++ {
		b[i] ^= 0x5a
	}
	os.WriteFile(garbled, b, 0o600)
	r := fails(t, 2, "file is corrupt: version 1 file: segment 0, slot ", "upgrade", garbled)
	if !strings.Contains(r.stderr, "'offmap recover' it first") {
		t.Errorf("upgrade of a damaged file: %q", r.stderr)
	}
	if after, _ := os.ReadFile(garbled); !bytes.Equal(after, b) {
		t.Error("a failed upgrade changed the file")
	}

	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.map")
	os.WriteFile(foreign, []byte("<html>not a map</html>\n"), 0o600)
	fails(t, 2, "not a file of this kind", "upgrade", foreign)
	fails(t, 2, "no such file", "upgrade", filepath.Join(dir, "missing.map"))
	fails(t, 2, "wrong number of arguments", "upgrade")
}
