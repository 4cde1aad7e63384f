package queue

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNotAQueue(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrNotQueue) {
		t.Fatalf("directory with other files: %v", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(file, Options{}); err == nil {
		t.Fatal("a plain file opened as a queue")
	}
}

// TestBadMetadata damages the metadata file in each way and expects the
// matching sentinel error.
func TestBadMetadata(t *testing.T) {
	good := func(t *testing.T) (string, []byte) {
		dir := t.TempDir()
		q := openT(t, dir, Options{})
		q.Append([]byte("x"))
		q.Close()
		b, err := os.ReadFile(filepath.Join(dir, metaName))
		if err != nil {
			t.Fatal(err)
		}
		return dir, b
	}
	cases := []struct {
		name   string
		damage func(b []byte) []byte
		want   error
	}{
		{"empty", func(b []byte) []byte { return nil }, ErrEmptyFile},
		{"foreign", func(b []byte) []byte { copy(b, "NOTQUEUE"); return b }, ErrForeign},
		{"future version", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], flagsVersion+1); return b }, ErrVersion},
		{"truncated", func(b []byte) []byte { return b[:100] }, ErrTruncated},
		{"checksum", func(b []byte) []byte { b[20] ^= 1; return b }, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, b := good(t)
			os.WriteFile(filepath.Join(dir, metaName), c.damage(b), 0o644)
			if _, err := Open(dir, Options{}); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	t.Run("options mismatch", func(t *testing.T) {
		dir, _ := good(t)
		_, err := Open(dir, Options{Roll: Hourly})
		if !errors.Is(err, ErrOptionsMismatch) {
			t.Fatalf("got %v", err)
		}
		if want := "queue: open " + dir + ": options conflict with the existing queue: roll cycle hourly, the queue's is daily"; err.Error() != want {
			t.Fatalf("%q, want %q (the package and the directory named once)", err.Error(), want)
		}
	})
	t.Run("invalid options", func(t *testing.T) {
		for _, o := range []Options{{Roll: 9}, {IndexSpacing: 3}, {BlockSize: 100}, {MaxCycleSize: 1 << 40}} {
			if _, err := Open(t.TempDir(), o); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("%+v: %v", o, err)
			}
		}
	})
}

// TestBadCycleFile damages a cycle file in each way: a tailer reading it
// and an appender appending to it get the matching error.
func TestBadCycleFile(t *testing.T) {
	cases := []struct {
		name   string
		damage func(b []byte) []byte
		want   error
	}{
		{"empty", func(b []byte) []byte { return nil }, ErrEmptyFile},
		{"foreign", func(b []byte) []byte { copy(b, "ELF....."); return b }, ErrForeign},
		{"future version", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 9); return b }, ErrVersion},
		{"truncated header", func(b []byte) []byte { return b[:1000] }, ErrTruncated},
		{"checksum", func(b []byte) []byte { b[16] ^= 1; return b }, ErrCorrupt},
		{"slot length", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[dataStart:], 0xfffffff0|uint64(1)<<genShift) // a huge length
			return b
		}, ErrCorrupt},
		{"slot past the end", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[dataStart:], uint64(len(b))|uint64(1)<<genShift)
			return b
		}, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			q := openT(t, dir, Options{})
			q.Append([]byte("x"))
			cs, _ := q.Cycles()
			q.Close()
			path := filepath.Join(dir, q.cycleName(cs[0]))
			b, _ := os.ReadFile(path)
			os.WriteFile(path, c.damage(b), 0o644)
			q, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			var ce *CheckError
			if _, err := q.Check(); !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], q.cycleName(cs[0])) {
				t.Fatalf("Check: %v, want one problem with the cycle file", err)
			}
			tl := tailerT(t, q)
			if _, _, err := tl.Next(); !errors.Is(err, c.want) {
				t.Fatalf("tailer: got %v, want %v", err, c.want)
			}
			if c.name[:4] == "slot" {
				return // appenders start at the write hint, past the damage
			}
			if _, err := q.Append([]byte("y")); !errors.Is(err, c.want) {
				t.Fatalf("append: got %v, want %v", err, c.want)
			}
		})
	}
}
