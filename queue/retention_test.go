package queue

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestRetention(t *testing.T) {
	clk := newClock()
	var mu sync.Mutex
	var deleted []uint32
	q := openT(t, t.TempDir(), Options{Roll: Minutely, clock: clk.Now, OnCycle: func(e CycleEvent) {
		if e.Kind == CycleDeleted {
			mu.Lock()
			deleted = append(deleted, e.Cycle)
			mu.Unlock()
		}
	}})
	slow, _ := q.NamedTailer("slow")
	var first []uint64
	for c := 0; c < 6; c++ {
		x, _ := q.Append(msgOf(c))
		first = append(first, x)
		clk.Advance(time.Minute)
	}
	cs, _ := q.Cycles()
	if len(cs) != 6 {
		t.Fatalf("%d cycles", len(cs))
	}
	// The named tailer acknowledged nothing: every cycle is spared.
	if d, err := q.DeleteCycles(2, false); err != nil || len(d) != 0 {
		t.Fatalf("deleted %v, %v", d, err)
	}
	slow.Next()
	slow.Next()
	slow.Next()
	slow.Ack() // now in cycle 2 (0-based): cycles 0 and 1 may go
	d, err := q.DeleteCycles(2, false)
	if err != nil || !slices.Equal(d, cs[:2]) {
		t.Fatalf("deleted %v, %v; want %v", d, err, cs[:2])
	}
	d, _ = q.DeleteCycles(2, true)
	if !slices.Equal(d, cs[2:4]) {
		t.Fatalf("forced: deleted %v, want %v", d, cs[2:4])
	}
	mu.Lock()
	if !slices.Equal(deleted, cs[:4]) {
		t.Fatalf("hook saw %v", deleted)
	}
	mu.Unlock()
	// A tailer from the start begins at the oldest cycle left; the slow
	// one, whose cycle is gone, goes on from the next one.
	tl := tailerT(t, q)
	if idx, m, _ := tl.Next(); idx != first[4] || !bytes.Equal(m, msgOf(4)) {
		t.Fatalf("from the start: %#x %q", idx, m)
	}
	slow.Close()
	slow, _ = q.NamedTailer("slow")
	if idx, _, _ := slow.Next(); idx != first[4] {
		t.Fatalf("named tailer after forced retention: %#x, want %#x", idx, first[4])
	}
}

func TestKeepCycles(t *testing.T) {
	clk := newClock()
	q := openT(t, t.TempDir(), Options{Roll: Minutely, clock: clk.Now, KeepCycles: 3})
	for c := 0; c < 8; c++ {
		q.Append(msgOf(c))
		clk.Advance(time.Minute)
	}
	q.Append(msgOf(8))
	cs, _ := q.Cycles()
	if len(cs) != 3 {
		t.Fatalf("%d cycles kept, want 3", len(cs))
	}
}

// TestForgetRacesRelease deletes a cycle while other goroutines take and
// drop references to it: every mapping is unmapped exactly once.
func TestForgetRacesRelease(t *testing.T) {
	clk := newClock()
	q := openT(t, t.TempDir(), Options{Roll: Minutely, clock: clk.Now})
	q.Append(msgOf(0))
	n := q.wcur.Load().num
	before := repeatedUnmaps.Load()
	for round := 0; round < 2000; round++ {
		c, _, err := q.acquire(n, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.release() }()
		go func() { defer wg.Done(); q.forget(n) }()
		wg.Wait()
	}
	if d := repeatedUnmaps.Load() - before; d != 0 {
		t.Fatalf("%d cycles unmapped twice", d)
	}
}
