package queue

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestSeekAcrossCycles(t *testing.T) {
	clk := newClock()
	q := openT(t, t.TempDir(), Options{Roll: Hourly, clock: clk.Now, IndexSpacing: 4})
	var idx []uint64
	for c := 0; c < 3; c++ {
		for i := 0; i < 300; i++ {
			n := len(idx)
			x, err := q.Append(msgOf(n)[:1+n%13]) // varied lengths
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, x)
		}
		clk.Advance(time.Hour)
	}
	tl := tailerT(t, q)
	for _, n := range []int{0, 1, 3, 4, 5, 299, 300, 301, 555, 899, 123, 0} {
		if err := tl.Seek(idx[n]); err != nil {
			t.Fatalf("seek %#x: %v", idx[n], err)
		}
		if tl.Index() != idx[n] {
			t.Fatalf("after seek to %#x the tailer is at %#x", idx[n], tl.Index())
		}
		got, m, err := tl.Next()
		if err != nil || got != idx[n] || !bytes.Equal(m, msgOf(n)[:1+n%13]) {
			t.Fatalf("seek %#x then Next: %#x %q %v", idx[n], got, m, err)
		}
	}
	// The end of a cycle: the next message comes from the next cycle.
	c0, _ := SplitIndex(idx[0])
	if err := tl.Seek(Index(c0, 300)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := tl.Next(); err != nil || got != idx[300] {
		t.Fatalf("from the end of cycle 0: %#x %v, want %#x", got, err, idx[300])
	}
	for _, bad := range []uint64{Index(c0, 301), Index(c0+7, 0), idx[899] + 2} {
		if err := tl.Seek(bad); !errors.Is(err, ErrNotFound) {
			t.Fatalf("seek %#x: %v, want ErrNotFound", bad, err)
		}
	}
	if err := tl.SeekEnd(); err != nil {
		t.Fatal(err)
	}
	if tl.HasNext() || tl.Index() != idx[899]+1 {
		t.Fatalf("at the end: index %#x, want %#x", tl.Index(), idx[899]+1)
	}
	x, _ := q.Append([]byte("late"))
	if got, m, err := tl.Next(); err != nil || got != x || string(m) != "late" {
		t.Fatalf("after SeekEnd: %#x %q %v", got, m, err)
	}
	if err := tl.SeekStart(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := tl.Next(); got != idx[0] {
		t.Fatalf("after SeekStart: %#x, want %#x", got, idx[0])
	}
}

// TestSeekUsesIndex fills more than one index array and checks that a
// seek reads at most IndexSpacing headers.
func TestSeekUsesIndex(t *testing.T) {
	q := openT(t, t.TempDir(), Options{IndexSpacing: 2})
	n := 2*indexEntries*2 + 100
	var idx []uint64
	for i := 0; i < n; i++ {
		x, err := q.Append(msgOf(i))
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, x)
	}
	tl := tailerT(t, q)
	c, _, err := q.acquire(q.wcur.Load().num, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	for _, i := range []int{0, 1, 2, 4095, 4096, 8191, 8192, 8193, 16383, 16384, n - 1} {
		mem := c.mem()
		s, _ := c.indexed(&mem, uint32(i))
		if uint32(i)-s >= 2 {
			t.Fatalf("index for %d starts the scan at %d", i, s)
		}
		if err := tl.Seek(idx[i]); err != nil {
			t.Fatal(err)
		}
		if _, m, err := tl.Next(); err != nil || !bytes.Equal(m, msgOf(i)) {
			t.Fatalf("seek %d: %q %v", i, m, err)
		}
	}
}
