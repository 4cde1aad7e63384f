package queue

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestReadBackwards reads a queue of several cycles backwards, with a
// skipped slot, an aborted reservation and a cycle deleted by retention.
func TestReadBackwards(t *testing.T) {
	clk := newClock()
	q := openT(t, t.TempDir(), Options{Roll: Minutely, clock: clk.Now, IndexSpacing: 4, SkipAfter: time.Millisecond})
	var want []uint64 // indexes of the complete messages, in order
	n := 0
	for c := range 4 {
		for i := range 30 {
			if i == 7 {
				w, _ := q.Reserve(3)
				w.Abort()
			}
			idx, err := q.Append(msgOf(n))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, idx)
			n++
		}
		if c < 3 {
			clk.Advance(time.Minute)
		}
	}
	tl := tailerT(t, q)
	for i := len(want) - 1; i >= 0; i-- {
		idx, m, err := tl.Prev()
		if err != nil || idx != want[i] || string(m) != string(msgOf(i)) {
			t.Fatalf("Prev %d: %#x %q %v, want %#x %q", len(want)-i, idx, m, err, want[i], msgOf(i))
		}
	}
	if _, _, err := tl.Prev(); err != ErrNoMessage {
		t.Fatalf("Prev before the first message: %v", err)
	}
	// After Prev, Next returns the same message and goes on forwards.
	if idx, _, err := tl.Next(); err != nil || idx != want[0] {
		t.Fatalf("Next after the last Prev: %#x %v", idx, err)
	}

	if first, err := q.FirstIndex(); err != nil || first != want[0] {
		t.Fatalf("FirstIndex %#x %v, want %#x", first, err, want[0])
	}
	if last, err := q.LastIndex(); err != nil || last != want[len(want)-1] {
		t.Fatalf("LastIndex %#x %v, want %#x", last, err, want[len(want)-1])
	}
	// Count counts sequence numbers: the aborted reservation of each cycle too.
	if c, err := q.Count(0, math.MaxUint64); err != nil || c != int64(len(want))+4 {
		t.Fatalf("Count %d %v, want %d", c, err, len(want)+4)
	}

	for _, k := range []int{0, 1, 5, 31, 95, 500} {
		tl := tailerT(t, q)
		if err := tl.SeekLast(k); err != nil {
			t.Fatal(err)
		}
		from := max(len(want)-k, 0)
		for i := from; i < len(want); i++ {
			if idx, _, err := tl.Next(); err != nil || idx != want[i] {
				t.Fatalf("SeekLast(%d): message %d: %#x %v, want %#x", k, i-from, idx, err, want[i])
			}
		}
		if _, _, err := tl.Next(); err != ErrNoMessage {
			t.Fatalf("SeekLast(%d): more messages: %v", k, err)
		}
	}

	// Retention deletes the first cycle: backwards reading stops there.
	if _, err := q.DeleteCycles(3, false); err != nil {
		t.Fatal(err)
	}
	tl = tailerT(t, q)
	if err := tl.SeekLast(1000); err != nil {
		t.Fatal(err)
	}
	if idx, _, err := tl.Next(); err != nil || idx != want[30] {
		t.Fatalf("first message after retention: %#x %v, want %#x", idx, err, want[30])
	}
	if first, err := q.FirstIndex(); err != nil || first != want[30] {
		t.Fatalf("FirstIndex after retention: %#x %v", first, err)
	}
}

func TestReadBackwardsEmpty(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	tl := tailerT(t, q)
	if _, _, err := tl.Prev(); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("Prev on an empty queue: %v", err)
	}
	if _, err := q.FirstIndex(); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("FirstIndex: %v", err)
	}
	if _, err := q.LastIndex(); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("LastIndex: %v", err)
	}
	if n, err := q.Count(0, math.MaxUint64); n != 0 || err != nil {
		t.Fatalf("Count: %d %v", n, err)
	}
	if err := tl.SeekLast(3); err != nil {
		t.Fatal(err)
	}
}

// TestFirstIndexPastBusySlot: a slot still being written at the start
// does not hide the complete messages after it.
func TestFirstIndexPastBusySlot(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	w, err := q.Reserve(4)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := q.Append([]byte("done"))
	if first, err := q.FirstIndex(); err != nil || first != second {
		t.Fatalf("FirstIndex %#x %v, want %#x", first, err, second)
	}
	if last, err := q.LastIndex(); err != nil || last != second {
		t.Fatalf("LastIndex %#x %v, want %#x", last, err, second)
	}
	w.Commit()
}
