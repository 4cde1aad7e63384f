package offmap

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
)

// checkProblems runs Check and returns its problems (nil if sound).
func checkProblems(t *testing.T, m *Map) []string {
	t.Helper()
	err := m.Check()
	if err == nil {
		return nil
	}
	var ce *CheckError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check: %v, want a CheckError", err)
	}
	return ce.Problems
}

func hasProblem(ps []string, s string) bool {
	for _, p := range ps {
		if strings.Contains(p, s) {
			return true
		}
	}
	return false
}

// TestCheckNeverRepairs: damage that a writer would repair on its way (an
// odd version under a free lock, a pending redo record) is reported by
// Check and left as it is, twice over; Recover then repairs it.
func TestCheckNeverRepairs(t *testing.T) {
	m := openTest(t, small)
	mustPut(t, m, []byte("k"), []byte("v"))
	s := m.segment(m.hash([]byte("k")).seg)
	s.hdr.version.Add(1)
	for range 2 {
		ps := checkProblems(t, m)
		if !hasProblem(ps, "version is odd with no writer") {
			t.Fatalf("Check found %q", ps)
		}
		if s.hdr.version.Load()&1 == 0 {
			t.Fatal("Check repaired the segment")
		}
	}
	if _, err := m.Recover(); err != nil {
		t.Fatal(err)
	}
	if ps := checkProblems(t, m); ps != nil {
		t.Fatalf("after Recover: %q", ps)
	}
	mustGet(t, m, []byte("k"), "v")
}

// TestCheckFile: a reserved header byte outside the checksum and the end
// of the claimed space, which Open does not look at under an open map:
// Check reports both, and after Recover neither.
func TestCheckFile(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mustPut(t, m, []byte("k"), []byte("v"))

	// Damage the file under the open map: a process that opens it alone
	// would repair the growth word.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{7}, 2000); err != nil { // in the reserved part of the header page
		t.Fatal(err)
	}
	var end [8]byte // the claimed space's end, past MaxFileSize
	binary.LittleEndian.PutUint64(end[:], 1<<50)
	if _, err := f.WriteAt(end[:], growthWordsOff); err != nil {
		t.Fatal(err)
	}
	f.Close()

	mustGet(t, m, []byte("k"), "v")
	ps := checkProblems(t, m)
	if len(ps) != 2 || !hasProblem(ps, "reserved byte at offset 2000") || !hasProblem(ps, "claimed space ends at") {
		t.Fatalf("Check found %q, want the reserved byte and the claimed space", ps)
	}
	if err := m.Put([]byte("new"), make([]byte, 200)); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Put that needs growth in a map with a damaged growth word: %v, want ErrCorrupt or success", err)
	}
	// Recover puts the claimed space's end back and clears the byte.
	fixed, err := m.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(fixed, "reserved bytes [1408, 4096) cleared (the first not zero was at offset 2000)") {
		t.Fatalf("Recover: %q", fixed)
	}
	if ps := checkProblems(t, m); ps != nil {
		t.Fatalf("Check after Recover found %q", ps)
	}
	mustGet(t, m, []byte("k"), "v")
}

// TestCheckReservedUnderChecksum: a reserved byte under the header's
// checksum, sealed by it, is reported and left: Recover does not rewrite
// the sealed header.
func TestCheckReservedUnderChecksum(t *testing.T) {
	b := validFile(t)
	b[200] = 1
	reseal(b)
	m, err := Open(writeFile(t, b), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for range 2 {
		if ps := checkProblems(t, m); len(ps) != 1 || !hasProblem(ps, "reserved byte at offset 200 is not zero") {
			t.Fatalf("Check found %q", ps)
		}
		m.Recover()
	}
}

// TestCheckReadOnlyWhileWriting: a read-only Check of a segment that a
// writer keeps changing reports nothing. It reads the version, then the
// lock's owner: a write that ends between the two (version even again,
// lock released) must not look like an odd version under a free lock.
func TestCheckReadOnlyWhileWriting(t *testing.T) {
	opts := Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8, Segments: 1}
	w := openTest(t, opts)
	r, err := Open(w.Path(), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		k := []byte("k00")
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			k[1], k[2] = byte('0'+i%10), byte('0'+i/10%10)
			if err := w.Put(k, k); err != nil {
				done <- err
				return
			}
			runtime.Gosched() // room for a check to see the segment still
		}
	}()
	clean := 0
	for range 3000 {
		ps, err := r.CheckSegment(0)
		if errors.Is(err, ErrLockTimeout) && len(ps) == 0 {
			continue // no claim of damage: the check gave up
		}
		if err != nil || len(ps) != 0 {
			close(stop)
			<-done
			t.Fatalf("CheckSegment while a writer writes: %q %v", ps, err)
		}
		clean++
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if clean < 100 {
		t.Fatalf("%d of 3000 checks saw the segment still", clean)
	}
}

// TestGrowthWordsReservedWithoutReuse: in a map without flag 3 (here one
// that evicts) the free-list changes and reuse counts are reserved bytes:
// damage there is reported, and Recover clears it.
func TestGrowthWordsReservedWithoutReuse(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8, Evict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	mustPut(t, m, []byte("k"), []byte("v"))
	m.mem[freeChangesOff+9] = 1 // in the reuse count
	if ps := checkProblems(t, m); len(ps) != 1 || !hasProblem(ps, "reserved byte at offset 289") {
		t.Fatalf("Check found %q, want the reserved byte at 289", ps)
	}
	fixed, err := m.Recover()
	if err != nil || !hasProblem(fixed, "reserved bytes [280, 320) cleared") {
		t.Fatalf("Recover: %q, %v", fixed, err)
	}
	mustGet(t, m, []byte("k"), "v")
}
