package offmap

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestZeroOptions creates a map with no sizes at all: it starts small,
// with the defaults Options documents, and then takes 100,000 entries
// by growing, with every entry readable, Check clean, and the file
// reopened with no sizes either.
func TestZeroOptions(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatalf("Open with zero Options: %v", err)
	}
	st := m.Stats()
	if st.Capacity != 1024 || st.AverageKeySize != 32 || st.AverageValueSize != 64 ||
		st.MaxKeySize != 256 || st.MaxValueSize != 4096 || st.Segments != 16 {
		t.Fatalf("zero Options made a map of capacity %d, keys %d/%d, values %d/%d, %d segments; want 1024, 32/256, 64/4096, 16",
			st.Capacity, st.AverageKeySize, st.MaxKeySize, st.AverageValueSize, st.MaxValueSize, st.Segments)
	}
	if st.StartFileSize != 384<<10 {
		t.Errorf("zero Options made a file of %d bytes, want the 384 KiB Options says", st.StartFileSize)
	}
	start := st.StartFileSize

	const n = 100_000
	k := func(i int) []byte { return fmt.Appendf(nil, "client-%08d@example.com", i) }                 // 30 bytes
	v := func(i int) []byte { return fmt.Appendf(nil, "session=%08d;region=eu-west-1;n=%d", i, i%7) } // 37 bytes
	for i := range n {
		if err := m.Put(k(i), v(i)); err != nil {
			t.Fatalf("Put of entry %d: %v", i, err)
		}
	}
	st = m.Stats()
	if st.Len != n || st.TablesGrown == 0 || st.ExtentsAdded == 0 || st.FileSize <= start {
		t.Fatalf("after %d Puts: Len %d, %d tables grown, %d extents added, file %d bytes (from %d)",
			n, st.Len, st.TablesGrown, st.ExtentsAdded, st.FileSize, start)
	}
	if err := m.Check(); err != nil {
		t.Fatalf("Check after %d Puts: %v", n, err)
	}
	big := bytes.Repeat([]byte("x"), 4096)
	if err := m.Put([]byte("big"), big); err != nil {
		t.Fatalf("Put of a value of MaxValueSize: %v", err)
	}
	if err := m.Put([]byte("bigger"), append(big, 'x')); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Put of a value past MaxValueSize: %v, want ErrValueTooLarge", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m, err = Open(p, Options{}) // zero sizes: the file's
	if err != nil {
		t.Fatalf("reopening with zero Options: %v", err)
	}
	defer closeChecked(t, m)
	if got := m.Len(); got != n+1 {
		t.Fatalf("reopened: Len %d, want %d", got, n+1)
	}
	for i := range n {
		mustGet(t, m, k(i), string(v(i)))
	}
	mustGet(t, m, []byte("big"), string(big))
	if err := m.Check(); err != nil {
		t.Fatalf("Check after reopening: %v", err)
	}
}

// TestDefaultSizes checks the defaults for each size left at zero beside
// others that are given, and that a default average yields to a bound
// given below it.
func TestDefaultSizes(t *testing.T) {
	for _, c := range []struct {
		opts                           Options
		entries, avgKey, maxKey        int
		avgValue, maxValue, maxEntries int
	}{
		{Options{}, 1024, 32, 256, 64, 4096, 0},
		{Options{Entries: 100_000}, 100_000, 32, 256, 64, 4096, 0},
		{Options{AverageKeySize: 100}, 1024, 100, 800, 64, 4096, 0},
		{Options{AverageValueSize: 8}, 1024, 32, 256, 8, 256, 0}, // the rule of a given average
		{Options{AverageValueSize: 1000}, 1024, 32, 256, 1000, 8000, 0},
		{Options{MaxValueSize: 16}, 1024, 32, 256, 16, 16, 0},
		{Options{MaxValueSize: 100_000}, 1024, 32, 256, 64, 100_000, 0},
		{Options{MaxKeySize: 10}, 1024, 10, 10, 64, 4096, 0},
	} {
		m := openTest(t, c.opts)
		st := m.Stats()
		if st.Capacity != c.entries || st.AverageKeySize != c.avgKey || st.MaxKeySize != c.maxKey ||
			st.AverageValueSize != c.avgValue || st.MaxValueSize != c.maxValue {
			t.Errorf("%+v: capacity %d, keys %d/%d, values %d/%d; want %d, %d/%d, %d/%d", c.opts,
				st.Capacity, st.AverageKeySize, st.MaxKeySize, st.AverageValueSize, st.MaxValueSize,
				c.entries, c.avgKey, c.maxKey, c.avgValue, c.maxValue)
		}
	}

	s, err := OpenSet(tempPath(t), Options{})
	if err != nil {
		t.Fatalf("OpenSet with zero Options: %v", err)
	}
	defer s.Close()
	if st := s.m.Stats(); st.Capacity != 1024 || st.AverageKeySize != 32 || st.MaxKeySize != 256 || st.MaxValueSize != 0 {
		t.Errorf("zero Options made a set of capacity %d, keys %d/%d, values up to %d", st.Capacity, st.AverageKeySize, st.MaxKeySize, st.MaxValueSize)
	}
	for i := range 5000 {
		if _, err := s.Add(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 5000 {
		t.Fatalf("set Len %d after 5000 Adds", s.Len())
	}
}
