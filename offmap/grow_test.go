package offmap

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/offmap/offmap/internal/testfs"
)

// bigValue is a value of n bytes that names key i, so that a value read
// back under the wrong key, or torn, shows.
func bigValue(i, n int) []byte {
	v := bytes.Repeat([]byte{byte(i)}, n)
	copy(v, fmt.Appendf(nil, "v%d:", i))
	return v
}

// growValueSize is the size of the i-th value in the growth tests: from
// the declared average up to 10 times it.
func growValueSize(i, avg int) int { return avg + i%(9*avg+1) }

// TestGrowFarPastEntries: a map declared for 1,000 entries of 16-byte
// values takes 50,000 with values up to 160 bytes, keeps every one, and
// opens again with all of them.
func TestGrowFarPastEntries(t *testing.T) {
	p := tempPath(t)
	opts := Options{Entries: 1000, AverageKeySize: 11, AverageValueSize: 16, MaxValueSize: 512}
	m, err := Open(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	start := m.Stats()
	const n = 50_000
	for i := range n {
		mustPut(t, m, key(i), bigValue(i, growValueSize(i, 16)))
	}
	st := m.Stats()
	if st.Len != n || st.TablesGrown == 0 || st.ExtentsAdded == 0 || st.FileSize <= start.FileSize ||
		st.StartFileSize != start.FileSize || st.EntrySpace <= start.EntrySpace {
		t.Fatalf("after %d puts: %+v", n, st)
	}
	for _, s := range st.PerSegment {
		if s.Entries > s.MaxEntries || s.Slots <= int(m.hdr.SlotsPerSegment) || s.Extents < 2 {
			t.Fatalf("segment did not grow as it filled: %+v", s)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	// Updates that relocate values into grown extents, and deletes.
	for i := 0; i < n; i += 7 {
		mustPut(t, m, key(i), bigValue(i, 300))
	}
	for i := 3; i < n; i += 11 {
		if ok, err := m.Delete(key(i)); !ok || err != nil {
			t.Fatalf("Delete(%s) = %v, %v", key(i), ok, err)
		}
	}
	m.Close()

	m, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	for i := range n {
		switch {
		case i >= 3 && (i-3)%11 == 0:
			mustMiss(t, m, key(i))
		case i%7 == 0:
			mustGet(t, m, key(i), string(bigValue(i, 300)))
		default:
			mustGet(t, m, key(i), string(bigValue(i, growValueSize(i, 16))))
		}
	}
	seen := 0
	m.Range(func(k, v []byte) bool { seen++; return true })
	if seen != m.Len() {
		t.Fatalf("Range saw %d entries, Len is %d", seen, m.Len())
	}
}

// TestGrowKeepsHandles: a value handle acquired before the map grows keeps
// its address and keeps counting, in the map's memory, while the map
// grows 50 times over.
func TestGrowKeepsHandles(t *testing.T) {
	m := openTest(t, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8})
	h, err := m.AcquireInt64([]byte("hits"))
	if err != nil {
		t.Fatal(err)
	}
	typed, err := Acquire[atomic.Int64](m, []byte("typed"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		mustPut(t, m, key(i), bigValue(i, growValueSize(i, 8)))
		h.Add(1)
		typed.Add(2)
	}
	again, err := Acquire[atomic.Int64](m, []byte("typed"))
	if err != nil {
		t.Fatal(err)
	}
	if again != typed || again.Load() != 10000 || h.Load() != 5000 {
		t.Fatalf("handle acquired after growth: address %p (before %p), value %d; Int64 handle %d",
			again, typed, again.Load(), h.Load())
	}
	mustGet(t, m, []byte("hits"), string(le(5000)))
	if m.Stats().TablesGrown == 0 {
		t.Fatal("the map did not grow")
	}
}

// TestGrowLimit: at MaxFileSize Put returns ErrFull, and everything stored
// before is still there.
func TestGrowLimit(t *testing.T) {
	opts := Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 16, MaxFileSize: 512 << 10}
	m := openTest(t, opts)
	var err error
	n := 0
	for ; n < 1_000_000; n++ {
		if err = m.Put(key(n), bigValue(n, 100)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "MaxFileSize") {
		t.Fatalf("after %d puts: %v, want ErrFull at MaxFileSize", n, err)
	}
	if st := m.Stats(); st.FileSize > opts.MaxFileSize || st.Len != n || n < 1000 {
		t.Fatalf("after ErrFull: %d entries, %+v", n, st)
	}
	for i := range n {
		mustGet(t, m, key(i), string(bigValue(i, 100)))
	}
	mustMiss(t, m, key(n))
	// What still fits goes in: an update in place, a delete and a re-insert.
	mustPut(t, m, key(0), bigValue(7, 100))
	if ok, _ := m.Delete(key(1)); !ok {
		t.Fatal("Delete failed")
	}
	mustPut(t, m, key(1), bigValue(1, 100))
}

// TestGrowValuesTenTimesAverage: values ten times the declared average,
// for thousands of keys, are not an error.
func TestGrowValuesTenTimesAverage(t *testing.T) {
	m := openTest(t, Options{Entries: 500, AverageKeySize: 11, AverageValueSize: 20})
	for i := range 5000 {
		mustPut(t, m, key(i), bigValue(i, 200))
	}
	for i := range 5000 {
		mustGet(t, m, key(i), string(bigValue(i, 200)))
	}
}

// TestGrowUpdateKeys: a multi-key update that needs room grows the
// segments first and then makes every change.
func TestGrowUpdateKeys(t *testing.T) {
	m := openTest(t, Options{Entries: 20, AverageKeySize: 11, AverageValueSize: 8, Segments: 1})
	for round := range 200 {
		keys := [][]byte{key(2 * round), key(2*round + 1)}
		err := m.UpdateKeys(keys, func(v [][]byte, found []bool) ([][]byte, []Op) {
			return [][]byte{bigValue(2*round, 80), bigValue(2*round+1, 80)}, []Op{OpPut, OpPut}
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	for i := range 400 {
		mustGet(t, m, key(i), string(bigValue(i, 80)))
	}
}

// TestGrowHeap exercises growth on a heap-backed map, which the race
// detector can see into: concurrent readers check every value while
// writers make the map grow.
func TestGrowHeap(t *testing.T) {
	m, err := openHeap(Options{Entries: 64, AverageKeySize: 11, AverageValueSize: 8, Segments: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const n = 3000
	done := make(chan error, 3)
	for w := range 2 {
		go func() {
			for i := w; i < n; i += 2 {
				if err := m.Put(key(i), bigValue(i, growValueSize(i, 8))); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	go func() {
		for i := range n {
			want := bigValue(i, growValueSize(i, 8))
			for {
				v, err := m.Get(key(i))
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil || !bytes.Equal(v, want) {
					done <- fmt.Errorf("Get(%s) = %q, %v", key(i), v, err)
					return
				}
				break
			}
		}
		done <- nil
	}()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestGrowFullDisk: a map on a file system that fills up returns ErrFull
// wrapping ENOSPC, never SIGBUS, and keeps what it had.
func TestGrowFullDisk(t *testing.T) {
	dir, ok := testfs.Tmpfs(t, 2<<20)
	if !ok {
		return
	}
	m, err := Open(dir+"/full.map", Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	n := 0
	for ; n < 1_000_000; n++ {
		if err = m.Put(key(n), bigValue(n, 150)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after %d puts on a full disk: %v, want ErrFull wrapping ENOSPC", n, err)
	}
	for i := range n {
		mustGet(t, m, key(i), string(bigValue(i, 150)))
	}
}
