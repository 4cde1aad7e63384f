package offmap

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// tear changes one byte of key's value in place, as a power cut that
// wrote some of a value's pages and not others would leave it, without
// going through a write (which would keep the checksum).
func tear(t *testing.T, m *Map, key []byte) {
	t.Helper()
	s := m.segmentOf(key)
	_, _, e, found, _ := m.find(s, key, m.hash(key))
	if !found || e.valLen == 0 {
		t.Fatalf("%s not found", key)
	}
	s.mem[e.valOff()] ^= 0x40
}

// TestChecksumsFindTornEntries: with ChecksumEntries, Check reports an
// entry whose value no longer matches its checksum, and Recover drops it
// and nothing else; without, the same damage goes unseen.
func TestChecksumsFindTornEntries(t *testing.T) {
	for _, sums := range []bool{true, false} {
		t.Run(fmt.Sprint("checksums=", sums), func(t *testing.T) {
			m := openTest(t, Options{Entries: 1000, AverageKeySize: 11, AverageValueSize: 16, ChecksumEntries: sums})
			for i := range 500 {
				mustPut(t, m, key(i), bigValue(i, growValueSize(i, 16)))
			}
			// Updates of every kind keep the checksum: in place, relocated,
			// shrunk, and one word (through the redo record).
			mustPut(t, m, key(1), bigValue(1, growValueSize(1, 16)))
			mustPut(t, m, key(2), bigValue(2, 200))
			mustPut(t, m, key(3), bigValue(3, 9))
			mustPut(t, m, []byte("word"), le(1))
			mustPut(t, m, []byte("word"), le(2))
			if err := m.Update([]byte("word"), func(v []byte, _ bool) ([]byte, Op) { return le(balance(v) + 1), OpPut }); err != nil {
				t.Fatal(err)
			}
			h, err := m.AcquireInt64([]byte("handle"))
			if err != nil {
				t.Fatal(err)
			}
			h.Add(5) // pinned: not checked
			if err := m.Check(); err != nil {
				t.Fatalf("Check of a sound map: %v", err)
			}

			tear(t, m, key(77))
			err = m.Check()
			if !sums {
				if err != nil {
					t.Fatalf("Check without checksums: %v", err)
				}
				return
			}
			// The torn entry, and the counts that dropping it changes.
			if err == nil || strings.Count(err.Error(), "fails its checksum") != 1 {
				t.Fatalf("Check of a torn entry: %v", err)
			}
			fixed, err := m.Recover()
			if err != nil || len(fixed) == 0 || !strings.Contains(fixed[0], "fails its checksum (torn by a power cut?); entry dropped") {
				t.Fatalf("Recover: %q, %v", fixed, err)
			}
			mustMiss(t, m, key(77))
			for i := range 500 {
				switch i {
				case 77, 1, 2, 3:
				default:
					mustGet(t, m, key(i), string(bigValue(i, growValueSize(i, 16))))
				}
			}
			mustGet(t, m, key(2), string(bigValue(2, 200)))
			mustGet(t, m, []byte("word"), string(le(3)))
			if h.Load() != 5 {
				t.Fatalf("handle: %d", h.Load())
			}
		})
	}
}

// TestChecksumsOption: ChecksumEntries is a property of the file.
func TestChecksumsOption(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	if m.Stats().ChecksumEntries {
		t.Fatal("checksums without the option")
	}
	m.Close()
	if _, err := Open(p, Options{ChecksumEntries: true}); !errors.Is(err, ErrOptionsMismatch) {
		t.Fatalf("open without checksums asking for them: %v", err)
	}
	q := tempPath(t)
	m, err = Open(q, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8, ChecksumEntries: true})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	m.Close()
	m, err = Open(q, Options{}) // the file says
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Stats().ChecksumEntries {
		t.Fatal("the file's checksums are not reported")
	}
	mustGet(t, m, []byte("k"), "v")
	v, _ := m.Get([]byte("k"))
	if !bytes.Equal(v, []byte("v")) {
		t.Fatal(v)
	}
}

// TestChecksumsRejectDamagedLength: with ChecksumEntries, an entry whose
// value-length word was damaged (shorter, still inside its chunks) is
// ErrCorrupt to every read of its value, in writable and read-only
// processes, instead of wrong bytes; a pinned entry, which has no
// checksum that holds, still reads; Recover drops the damaged one only.
func TestChecksumsRejectDamagedLength(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 1000, AverageKeySize: 11, AverageValueSize: 16, ChecksumEntries: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	for i := range 100 {
		mustPut(t, m, key(i), bigValue(i, 40))
	}
	h, err := m.AcquireInt64([]byte("pinned"))
	if err != nil {
		t.Fatal(err)
	}
	h.Add(7)
	bad := key(42)
	s := m.segmentOf(bad)
	_, _, e, found, _ := m.find(s, bad, m.hash(bad))
	if !found || e.valLen != 40 {
		t.Fatalf("%s: found %v, %d bytes", bad, found, e.valLen)
	}
	shm32 := func(off int, v uint32) {
		s.mem[off], s.mem[off+1], s.mem[off+2], s.mem[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	shm32(e.off+4, 28)

	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, r := range []*Map{m, ro} {
		if v, err := r.Get(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: Get of the damaged entry = %q, %v; want ErrCorrupt", r.ReadOnly(), v, err)
		}
		if v, err := r.AppendValue(make([]byte, 0, 64), bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: AppendValue = %q, %v; want ErrCorrupt", r.ReadOnly(), v, err)
		}
		if err := r.Range(func(k, v []byte) bool { return true }); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: Range: %v; want ErrCorrupt", r.ReadOnly(), err)
		}
		if err := r.ViewKeys([][]byte{key(1), bad}, func([][]byte, []bool) {}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read-only %v: ViewKeys: %v; want ErrCorrupt", r.ReadOnly(), err)
		}
		mustGet(t, r, key(41), string(bigValue(41, 40)))
		mustGet(t, r, []byte("pinned"), string(le(7)))
	}
	if err := m.Update(bad, func(v []byte, _ bool) ([]byte, Op) { return v, OpPut }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Update of the damaged entry: %v; want ErrCorrupt", err)
	}
	if err := m.UpdateKeys([][]byte{bad}, func(v [][]byte, _ []bool) ([][]byte, []Op) { return v, []Op{OpPut} }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("UpdateKeys of the damaged entry: %v; want ErrCorrupt", err)
	}
	if fixed, err := m.Recover(); err != nil || !hasProblem(fixed, "fails its checksum") {
		t.Fatalf("Recover: %q, %v", fixed, err)
	}
	mustMiss(t, m, bad)
	for i := range 100 {
		if i != 42 {
			mustGet(t, m, key(i), string(bigValue(i, 40)))
		}
	}
}
