package offmap_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
	"github.com/offmap/offmap/offmap"
)

// The version 1 test file was made by the version 1 code with
// Options{Entries: 200, AverageKeySize: 8, AverageValueSize: 16}: Put
// "key-%03d" -> "value of key %d" for i in [0, 150), Delete of the keys
// with i%10 == 0, then Put "hits" -> 12345 as 8 bytes, little-endian.
const v1Testdata = "testdata/v1/requests.offmap.gz"

// v1Entries is what the test file holds.
func v1Entries() map[string]string {
	want := make(map[string]string)
	for i := range 150 {
		if i%10 != 0 {
			want[fmt.Sprintf("key-%03d", i)] = fmt.Sprintf("value of key %d", i)
		}
	}
	want["hits"] = string(binary.LittleEndian.AppendUint64(nil, 12345))
	return want
}

// v1File writes the test file, edited by edit, into a new directory and
// returns its path.
func v1File(t *testing.T, edit func(b []byte) []byte) string {
	t.Helper()
	f, err := os.Open(v1Testdata)
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
	data := b.Bytes()
	if edit != nil {
		data = edit(data)
	}
	path := filepath.Join(t.TempDir(), "requests.offmap")
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

// v1Slot is a used slot of a version 1 file, found the way a version 1
// reader finds it.
type v1Slot struct {
	seg     int
	wordOff int // of the slot word in the file
	word    uint64
	key     string
	entry   int // offset of the entry in the file
}

// v1Layout is what the tests need of a version 1 header.
type v1Layout struct {
	segments, slots, chunkSize         int
	segHeadersOff, segmentsOff, stride int
	scratchOff, areaOff                int
}

func v1LayoutOf(b []byte) v1Layout {
	le := binary.LittleEndian
	return v1Layout{
		segments: int(le.Uint32(b[56:])), chunkSize: int(le.Uint32(b[60:])), slots: int(le.Uint32(b[64:])),
		segHeadersOff: int(le.Uint64(b[80:])), segmentsOff: int(le.Uint64(b[88:])), stride: int(le.Uint64(b[96:])),
		scratchOff: int(le.Uint64(b[112:])), areaOff: int(le.Uint64(b[120:])),
	}
}

func v1Slots(b []byte) []v1Slot {
	le := binary.LittleEndian
	l := v1LayoutOf(b)
	var out []v1Slot
	for s := range l.segments {
		base := l.segmentsOff + s*l.stride
		for i := range l.slots {
			w := le.Uint64(b[base+8*i:])
			if w == 0 {
				continue
			}
			e := base + l.areaOff + int(uint32(w))*l.chunkSize
			keyLen := int(le.Uint32(b[e:]))
			out = append(out, v1Slot{seg: s, wordOff: base + 8*i, word: w, key: string(b[e+8 : e+8+keyLen]), entry: e})
		}
	}
	return out
}

// contentsOf reads every entry of the map at path, and checks it.
func contentsOf(t *testing.T, path string) map[string]string {
	t.Helper()
	m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	got := make(map[string]string)
	if err := m.Range(func(k, v []byte) bool {
		got[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if m.Len() != len(got) {
		t.Errorf("Len %d, Range saw %d", m.Len(), len(got))
	}
	return got
}

func sameEntries(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("key %q: %q (present %v), want %q", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected key %q", k)
		}
	}
}

// noLeftovers fails if the directory of path holds anything but path.
func noLeftovers(t *testing.T, path string) {
	t.Helper()
	names, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Name() != filepath.Base(path) {
		t.Errorf("the directory holds %v, want only %s", names, filepath.Base(path))
	}
}

func TestUpgrade(t *testing.T) {
	path := v1File(t, nil)
	_, err := offmap.Open(path, offmap.Options{})
	if !errors.Is(err, offmap.ErrVersion) || !strings.Contains(err.Error(), "offmap upgrade") {
		t.Fatalf("Open of a version 1 file: %v; want ErrVersion naming 'offmap upgrade'", err)
	}

	n, err := offmap.Upgrade(path)
	if err != nil {
		t.Fatal(err)
	}
	if n != 136 {
		t.Errorf("Upgrade copied %d entries, want 136", n)
	}
	noLeftovers(t, path)
	if fi, err := os.Stat(path); err != nil || runtime.GOOS != "windows" && fi.Mode().Perm() != 0o640 { // Windows has no modes
		t.Errorf("upgraded file: %v, %v; want mode 0640 as before", fi.Mode(), err)
	}
	want := v1Entries()
	sameEntries(t, contentsOf(t, path), want)

	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st := m.Stats()
	if st.FormatVersion != 3 || st.Capacity != 200 || st.AverageKeySize != 8 || st.AverageValueSize != 16 ||
		st.Segments != 3 || st.MaxKeySize != 256 || st.MaxValueSize != 256 || st.Len != 136 {
		t.Errorf("upgraded map: %+v", st)
	}
	hits, err := m.AcquireInt64([]byte("hits"))
	if err != nil {
		t.Fatal(err)
	}
	if got := hits.Load(); got != 12345 {
		t.Errorf("hits = %d, want 12345", got)
	}
	hits.Add(1)
	for i := 0; i < 150; i += 10 {
		if _, err := m.Get([]byte(fmt.Sprintf("key-%03d", i))); !errors.Is(err, offmap.ErrNotFound) {
			t.Errorf("deleted key-%03d: %v", i, err)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}

	// A map of version 2 grows past the 200 entries it was made for.
	value := bytes.Repeat([]byte("v"), 100)
	for i := range 5000 {
		if err := m.Put([]byte(fmt.Sprintf("more-%05d", i)), value); err != nil {
			t.Fatalf("put %d into the upgraded map: %v", i, err)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	st = m.Stats()
	if st.Len != 5136 || st.TablesGrown == 0 || st.ExtentsAdded == 0 || st.FileSize <= st.StartFileSize {
		t.Errorf("after 5000 more entries: len %d, tables grown %d, extents added %d, file %d bytes from %d",
			st.Len, st.TablesGrown, st.ExtentsAdded, st.FileSize, st.StartFileSize)
	}
	if got := hits.Load(); got != 12346 {
		t.Errorf("hits = %d after growth, want 12346", got)
	}
}

// TestUpgradeSymlink: a symbolic link to the map stays one.
func TestUpgradeSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a symbolic link needs a privilege on Windows, and Wine's do not resolve")
	}
	target := v1File(t, nil)
	link := filepath.Join(t.TempDir(), "link.offmap")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if n, err := offmap.Upgrade(link); err != nil || n != 136 {
		t.Fatalf("Upgrade through a link: %d, %v", n, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is gone: %v, %v", fi.Mode(), err)
	}
	noLeftovers(t, target)
	sameEntries(t, contentsOf(t, target), v1Entries())
}

// TestUpgradeInUse: a map another process has open (it holds a shared
// flock, as Open does) is refused and left as it was.
func TestUpgradeInUse(t *testing.T) {
	path := v1File(t, nil)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := shm.Flock(other, false, false); err != nil {
		t.Fatal(err)
	}
	_, err = offmap.Upgrade(path)
	if err == nil || !strings.Contains(err.Error(), "another process has the map open") {
		t.Fatalf("Upgrade of a map in use: %v", err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("a refused upgrade changed the file (%v)", err)
	}
	noLeftovers(t, path)
	other.Close()
	if n, err := offmap.Upgrade(path); err != nil || n != 136 {
		t.Fatalf("Upgrade once the map is free: %d, %v", n, err)
	}
}

// TestUpgradeCurrent: a file of the current version is ErrCurrent, and
// left as it was.
func TestUpgradeCurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.map")
	m, err := offmap.Open(path, offmap.Options{Entries: 10, AverageKeySize: 4, AverageValueSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	m.Close()
	before, _ := os.ReadFile(path)
	_, err = offmap.Upgrade(path)
	if !errors.Is(err, offmap.ErrCurrent) || !strings.Contains(err.Error(), "already has the current format version") {
		t.Fatalf("Upgrade of a version 2 file: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("Upgrade changed a version 2 file")
	}
	noLeftovers(t, path)
	sameEntries(t, contentsOf(t, path), map[string]string{"k": "v"})
}

// TestUpgradeLeftovers: what a crashed version 1 process may leave is
// read as a repair would: an entry detached by a delete is dropped, a slot
// duplicated by a cut-off delete counts once, and an in-place update cut
// off after its redo record was written has its new value.
func TestUpgradeLeftovers(t *testing.T) {
	le := binary.LittleEndian
	path := v1File(t, func(b []byte) []byte {
		l := v1LayoutOf(b)
		slots := v1Slots(b)
		var updated, detached, duplicated *v1Slot
		for i := range slots {
			switch slots[i].key {
			case "key-001":
				updated = &slots[i]
			case "key-002":
				detached = &slots[i]
			case "key-003":
				duplicated = &slots[i]
			}
		}
		if updated == nil || detached == nil || duplicated == nil {
			t.Fatal("test file lacks key-001, key-002 or key-003")
		}
		// key-002 was deleted while pinned.
		le.PutUint64(b[detached.wordOff:], detached.word|1<<62)
		// key-003's slot is copied into the next empty slot of its segment.
		base := l.segmentsOff + duplicated.seg*l.stride
		for i := 1; i < l.slots; i++ {
			at := base + 8*((((duplicated.wordOff-base)/8)+i)%l.slots)
			if le.Uint64(b[at:]) == 0 {
				le.PutUint64(b[at:], duplicated.word)
				break
			}
		}
		// key-001's value is being rewritten from the redo record.
		base = l.segmentsOff + updated.seg*l.stride
		newValue := "VALUE OF KEY 1"
		le.PutUint64(b[base+l.scratchOff:], uint64(len(newValue)))
		copy(b[base+l.scratchOff+8:], newValue)
		chunk := (updated.entry - base - l.areaOff) / l.chunkSize
		le.PutUint64(b[l.segHeadersOff+64*updated.seg+48:], uint64(chunk)+1)
		return b
	})
	n, err := offmap.Upgrade(path)
	if err != nil {
		t.Fatal(err)
	}
	want := v1Entries()
	delete(want, "key-002")
	want["key-001"] = "VALUE OF KEY 1"
	if n != len(want) {
		t.Errorf("Upgrade copied %d entries, want %d", n, len(want))
	}
	sameEntries(t, contentsOf(t, path), want)
}

// TestUpgradeSet: a version 1 set (a map with no values) becomes a set.
func TestUpgradeSet(t *testing.T) {
	le := binary.LittleEndian
	// The test map made a set: no values in the header, none in the entries.
	path := v1File(t, func(b []byte) []byte {
		le.PutUint32(b[44:], 0) // AverageValueSize
		le.PutUint32(b[52:], 0) // MaxValueSize
		le.PutUint64(b[248:], xxhash.Sum64(b[:248]))
		for _, s := range v1Slots(b) {
			le.PutUint32(b[s.entry+4:], 0)
		}
		return b
	})
	n, err := offmap.Upgrade(path)
	if err != nil || n != 136 {
		t.Fatalf("Upgrade of a set: %d, %v", n, err)
	}
	s, err := offmap.OpenSet(path, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k := range v1Entries() {
		if ok, err := s.Has([]byte(k)); !ok || err != nil {
			t.Errorf("Has(%q) = %v, %v", k, ok, err)
		}
	}
	if s.Len() != 136 {
		t.Errorf("the set holds %d keys, want 136", s.Len())
	}
	if err := s.Map().Check(); err != nil {
		t.Error(err)
	}
}

// TestUpgradeDamaged: a damaged version 1 file is an error naming the
// damage, never a panic, and is left as it was.
func TestUpgradeDamaged(t *testing.T) {
	le := binary.LittleEndian
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"empty", func(b []byte) []byte { return nil }, offmap.ErrEmptyFile},
		{"truncated header", func(b []byte) []byte { return b[:100] }, offmap.ErrTruncated},
		{"truncated segments", func(b []byte) []byte { return b[:len(b)-1000] }, offmap.ErrTruncated},
		{"header checksum", func(b []byte) []byte { b[40] ^= 1; return b }, offmap.ErrCorrupt},
		{"foreign", func(b []byte) []byte { return []byte("<html>not a map</html>") }, offmap.ErrNotMap},
		{"unknown version", func(b []byte) []byte { b[8] = 7; return b }, offmap.ErrVersion},
		{"garbage slot words", func(b []byte) []byte {
			r := rand.New(rand.NewPCG(1, 2))
			l := v1LayoutOf(b)
			for i := range l.slots {
				le.PutUint64(b[l.segmentsOff+8*i:], r.Uint64())
			}
			return b
		}, offmap.ErrCorrupt},
		{"chunk out of range", func(b []byte) []byte {
			s := v1Slots(b)[0]
			le.PutUint64(b[s.wordOff:], s.word|0xffffff00)
			return b
		}, offmap.ErrCorrupt},
		{"key over the size limit", func(b []byte) []byte {
			s := v1Slots(b)[0]
			le.PutUint32(b[s.entry:], 300) // MaxKeySize is 256
			return b
		}, offmap.ErrCorrupt},
		{"key changed", func(b []byte) []byte {
			s := v1Slots(b)[0]
			b[s.entry+8] ^= 0x20
			return b
		}, offmap.ErrCorrupt},
		{"slot without its used bit", func(b []byte) []byte {
			s := v1Slots(b)[0]
			le.PutUint64(b[s.wordOff:], s.word&^(1<<63))
			return b
		}, offmap.ErrCorrupt},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			path := v1File(t, c.edit)
			before, _ := os.ReadFile(path)
			n, err := offmap.Upgrade(path)
			if !errors.Is(err, c.want) {
				t.Fatalf("Upgrade: %d, %v; want an error wrapping %v", n, err, c.want)
			}
			if !strings.Contains(err.Error(), "upgrade "+path) {
				t.Errorf("error %q does not name the file", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Error("a failed upgrade changed the file")
			}
			noLeftovers(t, path)
		})
	}
	_, err := offmap.Upgrade(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Upgrade of a missing file: %v", err)
	}
}

// TestUpgradeRandomDamage flips random bytes of the segments: Upgrade
// either refuses or writes a sound map, and never panics.
func TestUpgradeRandomDamage(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	refused := 0
	for range 60 {
		path := v1File(t, func(b []byte) []byte {
			l := v1LayoutOf(b)
			for range 1 + r.IntN(4) {
				b[l.segHeadersOff+r.IntN(len(b)-l.segHeadersOff)] ^= byte(1 + r.IntN(255))
			}
			return b
		})
		if _, err := offmap.Upgrade(path); err != nil {
			if !errors.Is(err, offmap.ErrCorrupt) {
				t.Fatalf("Upgrade of a damaged file: %v, want ErrCorrupt", err)
			}
			refused++
			continue
		}
		contentsOf(t, path) // opens and checks
	}
	if refused == 0 {
		t.Error("no damage was found in 60 damaged files")
	}
}
