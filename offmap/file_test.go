package offmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// validFile returns the bytes of a small map file holding a few entries.
func validFile(t testing.TB) []byte {
	t.Helper()
	p := tempPath(t)
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustPut(t, m, key(i), val(i))
	}
	m.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, b []byte) string {
	t.Helper()
	p := tempPath(t)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// reseal recomputes the header checksum after a test edits the header.
func reseal(b []byte) {
	binary.LittleEndian.PutUint64(b[checksumOff:], xxhash.Sum64(b[:checksumOff]))
}

func TestBadFiles(t *testing.T) {
	good := validFile(t)
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	cases := []struct {
		name string
		file []byte
		want error
	}{
		{"empty", nil, ErrEmptyFile},
		{"foreign text", []byte("hello, this is not a map file at all\n"), ErrNotMap},
		{"foreign zeros", make([]byte, 8192), ErrNotMap},
		{"magic only", []byte(magic), ErrTruncated},
		{"half header", good[:2000], ErrTruncated},
		{"header only", good[:headerSize], ErrTruncated},
		{"truncated body", good[:len(good)-4096], ErrTruncated},
		{"future version", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[8:], formatVersion+1); reseal(b) }), ErrVersion},
		{"flipped header bit", edit(func(b []byte) { b[40] ^= 4 }), ErrCorrupt},
		{"bad checksum", edit(func(b []byte) { b[checksumOff] ^= 1 }), ErrCorrupt},
		{"segments overlap", edit(func(b []byte) { binary.LittleEndian.PutUint64(b[88:], 4096); reseal(b) }), ErrCorrupt},
		{"huge chunk count", edit(func(b []byte) { binary.LittleEndian.PutUint64(b[72:], 1<<40); reseal(b) }), ErrCorrupt},
		{"zero segments", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[56:], 0); reseal(b) }), ErrCorrupt},
		{"wrong file size", edit(func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 1<<20); reseal(b) }), ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, c.file)
			m, err := Open(p, Options{})
			if err == nil {
				m.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error does not name the file: %v", err)
			}
			// Nothing already in the file was changed.
			after, _ := os.ReadFile(p)
			if !bytes.Equal(after, c.file) {
				t.Fatal("Open changed a file it rejected")
			}
		})
	}
}

func TestNotRegularFile(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{}); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
}

func TestOptionsMismatch(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	for _, o := range []Options{
		{Entries: 2000},
		{AverageKeySize: 9},
		{AverageValueSize: 16},
		{MaxValueSize: 10},
		{Segments: 3},
	} {
		m, err := Open(p, o)
		if !errors.Is(err, ErrOptionsMismatch) {
			t.Errorf("Open with %+v: %v, want ErrOptionsMismatch", o, err)
		} else if msg := err.Error(); strings.Count(msg, "offmap:") != 1 || strings.Count(msg, p) != 1 {
			t.Errorf("Open with %+v: %q names the package or the path more than once", o, msg)
		}
		if m != nil {
			m.Close()
		}
	}
	m, err = Open(p, Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8})
	if err != nil {
		t.Fatalf("Open with the file's own options: %v", err)
	}
	m.Close()
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{ // zero sizes take defaults (TestDefaultSizes)
		{Entries: -1, AverageKeySize: 8, AverageValueSize: 8},
		{Entries: -1},
		{AverageKeySize: -1},
		{AverageValueSize: -1},
		{MaxValueSize: -1},
		{Entries: 10, AverageKeySize: 8, AverageValueSize: 8, MaxKeySize: 1 << 20},
		{Entries: 10, AverageKeySize: 100, AverageValueSize: 8, MaxKeySize: 50},
		{Entries: 1 << 40, AverageKeySize: 8, AverageValueSize: 8},
		{Entries: 10, AverageKeySize: 8, AverageValueSize: 8, Segments: 1 << 20},
	} {
		p := tempPath(t)
		if _, err := Open(p, o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Open with %+v: %v, want ErrInvalidOptions", o, err)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open with %+v left a file behind", o)
		}
	}
}

func TestCreateInMissingDirectory(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "no", "such", "dir", "m.map"), small)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open in a missing directory: %v", err)
	}
}

func TestReadOnlyOption(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	h, _ := m.AcquireInt64([]byte("n"))
	h.Add(5)
	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	defer m.Close()
	checkReadOnly(t, ro)
	// Writes by another opener are visible to the read-only one at once.
	mustPut(t, m, []byte("k"), []byte("w"))
	mustGet(t, ro, []byte("k"), "w")
	if err := ro.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "absent"), Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open of a missing file: %v", err)
	}
}

func checkReadOnly(t testing.TB, ro *Map) {
	t.Helper()
	if !ro.ReadOnly() {
		t.Fatal("map is not read-only")
	}
	mustGet(t, ro, []byte("k"), "v")
	if err := ro.Put([]byte("k"), []byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put: %v, want ErrReadOnly", err)
	}
	if _, err := ro.Delete([]byte("k")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Delete: %v, want ErrReadOnly", err)
	}
	if err := ro.Update([]byte("k"), incr); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Update: %v, want ErrReadOnly", err)
	}
	if _, err := ro.AcquireInt64([]byte("n")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("AcquireInt64: %v, want ErrReadOnly", err)
	}
	n := 0
	ro.Range(func(k, v []byte) bool { n++; return true })
	if n != 2 || ro.Len() != 2 {
		t.Fatalf("Range saw %d entries, Len %d", n, ro.Len())
	}
}

func init() {
	children["create"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{Entries: 100000, AverageKeySize: 8, AverageValueSize: 8})
		if err != nil {
			return err
		}
		defer m.Close()
		k := []byte(os.Getenv("KEY"))
		if err := m.Put(k, k); err != nil {
			return err
		}
		return nil
	}
}

// TestCreateRace starts processes that all create the same path at once:
// all must end up in one valid map.
func TestCreateRace(t *testing.T) {
	for round := range 5 {
		p := filepath.Join(t.TempDir(), "race.map")
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := child(t, "create", "MAP="+p, fmt.Sprintf("KEY=p%d", i)).CombinedOutput()
				if err != nil {
					errs[i] = fmt.Errorf("%v: %s", err, out)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		m, err := Open(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Len() != len(errs) {
			t.Fatalf("round %d: %d entries, want %d", round, m.Len(), len(errs))
		}
		closeChecked(t, m)
		entries, _ := os.ReadDir(filepath.Dir(p))
		if len(entries) != 1 {
			t.Fatalf("round %d: directory holds %d files, want only the map", round, len(entries))
		}
	}
}
