package queue

import (
	"errors"
	"math"
	"testing"
	"time"
)

// countQueue makes a queue of four cycles of 20, 30, 40 and 50 messages,
// with a gap of one minute (no cycle file) before the third, then deletes
// the first cycle by retention. It returns the indexes of the messages
// that remain, and of the end of each remaining cycle (the index the next
// message there would get).
func countQueue(t *testing.T) (*Queue, *fakeClock, []uint64, []uint64) {
	clk := newClock()
	q := openT(t, t.TempDir(), Options{Roll: Minutely, clock: clk.Now, IndexSpacing: 4})
	var all [][]uint64
	for c, n := range []int{20, 30, 40, 50} {
		var idx []uint64
		for i := range n {
			x, err := q.Append(msgOf(i))
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, x)
		}
		all = append(all, idx)
		if c == 1 {
			clk.Advance(time.Minute) // no cycle file for this minute
		}
		if c < 3 {
			clk.Advance(time.Minute)
		}
	}
	if del, err := q.DeleteCycles(3, false); err != nil || len(del) != 1 {
		t.Fatalf("DeleteCycles: %v %v", del, err)
	}
	var kept, ends []uint64
	for _, idx := range all[1:] {
		kept = append(kept, idx...)
		ends = append(ends, idx[len(idx)-1]+1)
	}
	return q, clk, kept, ends
}

// countOf counts the indexes in [from, to).
func countOf(idx []uint64, from, to uint64) int64 {
	var n int64
	for _, x := range idx {
		if x >= from && x < to {
			n++
		}
	}
	return n
}

// TestCount: Count across cycles, a gap between them and a cycle deleted
// by retention, with ranges starting and ending inside cycles, at their
// first message, at their ends and past them; empty and reversed ranges
// count 0.
func TestCount(t *testing.T) {
	q, _, kept, ends := countQueue(t)
	c1, _ := SplitIndex(kept[0])
	c0 := c1 - 1 // deleted
	c2, c3 := uint32(ends[1]>>32), uint32(ends[2]>>32)
	if c2 != c1+2 || c3 != c2+1 {
		t.Fatalf("cycles %d %d %d: want a gap after %d", c1, c2, c3, c1)
	}
	cases := []struct {
		name     string
		from, to uint64
		want     int64 // -1: countOf
	}{
		{"everything", 0, math.MaxUint64, 120},
		{"the deleted cycle", Index(c0, 0), Index(c1, 0), 0},
		{"from inside the deleted cycle", Index(c0, 5), Index(c1, 3), 3},
		{"one cycle", Index(c1, 0), Index(c1+1, 0), 30},
		{"one cycle, to its end", Index(c1, 0), ends[0], 30},
		{"one cycle, to past its end", Index(c1, 0), ends[0] + 100, 30},
		{"inside one cycle", Index(c1, 3), Index(c1, 17), 14},
		{"at its end", ends[0], ends[0] + 1, 0},
		{"past its end", ends[0] + 1, Index(c1, 1000), 0},
		{"the gap", Index(c1+1, 0), Index(c1+1, 1000), 0},
		{"inside to inside, across the gap", Index(c1, 25), Index(c2, 10), 15},
		{"inside to inside, three cycles", Index(c1, 29), Index(c3, 1), 1 + 40 + 1},
		{"end to start", ends[0], Index(c2, 0), 0},
		{"end to end", ends[0], ends[1], 40},
		{"from past the end of one to inside the last", ends[1] + 7, Index(c3, 49), 49},
		{"to the last message", Index(c2, 0), ends[2] - 1, 40 + 49},
		{"to the end", Index(c2, 0), ends[2], 90},
		{"past the latest cycle", Index(c3+1, 0), math.MaxUint64, 0},
		{"empty", Index(c2, 7), Index(c2, 7), 0},
		{"empty at 0", 0, 0, 0},
		{"reversed", Index(c3, 5), Index(c1, 5), 0},
		{"reversed inside a cycle", Index(c2, 9), Index(c2, 2), 0},
	}
	for _, tc := range cases {
		got, err := q.Count(tc.from, tc.to)
		if err != nil {
			t.Fatalf("%s: Count(%#x, %#x): %v", tc.name, tc.from, tc.to, err)
		}
		if model := countOf(kept, tc.from, tc.to); tc.from < tc.to && model != tc.want {
			t.Fatalf("%s: the test's own count is %d, want %d", tc.name, model, tc.want)
		}
		if got != tc.want {
			t.Errorf("%s: Count(%d:%d, %d:%d) = %d, want %d", tc.name, tc.from>>32, uint32(tc.from), tc.to>>32, uint32(tc.to), got, tc.want)
		}
	}
	// Every pair of boundaries and messages, against the model.
	var points []uint64
	for _, x := range kept {
		if uint32(x)%7 == 0 {
			points = append(points, x)
		}
	}
	points = append(points, ends...)
	points = append(points, Index(c0, 0), Index(c1+1, 0), Index(c3+1, 0), math.MaxUint64)
	for _, from := range points {
		for _, to := range points {
			got, err := q.Count(from, to)
			if want := countOf(kept, from, to); err != nil || got != want {
				t.Fatalf("Count(%#x, %#x) = %d %v, want %d", from, to, got, err, want)
			}
		}
	}

	// Appends to the latest cycle count at once; a closed queue is an
	// error.
	if _, err := q.Append([]byte("one more")); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Count(Index(c3, 0), math.MaxUint64); err != nil || n != 51 {
		t.Fatalf("Count after an append: %d %v, want 51", n, err)
	}
	q.Close()
	if _, err := q.Count(0, math.MaxUint64); err != ErrClosed {
		t.Fatalf("Count on a closed queue: %v", err)
	}
}

// TestCountEmpty: a queue with no cycle file counts 0.
func TestCountEmpty(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	if n, err := q.Count(0, math.MaxUint64); n != 0 || err != nil {
		t.Fatalf("Count: %d %v", n, err)
	}
	tl := tailerT(t, q)
	if n, err := tl.Lag(); n != 0 || err != nil {
		t.Fatalf("Lag: %d %v", n, err)
	}
}

// TestTailerLag: a tailer's lag is the messages after its position,
// across cycles and past a deleted one, after reads, seeks and appends.
func TestTailerLag(t *testing.T) {
	q, _, kept, ends := countQueue(t)
	tl := tailerT(t, q)
	lag := func(want int64) {
		t.Helper()
		if n, err := tl.Lag(); err != nil || n != want {
			t.Fatalf("Lag at %#x: %d %v, want %d", tl.Index(), n, err, want)
		}
	}
	lag(120) // before its first read: the whole queue retention kept
	for i := range kept {
		if _, _, err := tl.Next(); err != nil {
			t.Fatal(err)
		}
		lag(int64(len(kept) - i - 1))
	}
	if _, _, err := tl.Next(); err != ErrNoMessage {
		t.Fatalf("Next at the end: %v", err)
	}
	lag(0)
	for i := range 5 {
		if _, err := q.Append(msgOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	lag(5)
	if err := tl.Seek(ends[0] - 10); err != nil {
		t.Fatal(err)
	}
	lag(10 + 40 + 55)
	if err := tl.SeekEnd(); err != nil {
		t.Fatal(err)
	}
	lag(0)
	tl.Close()
	if _, err := tl.Lag(); err != ErrClosed {
		t.Fatalf("Lag of a closed tailer: %v", err)
	}
}

// TestTailerLagAllocs: Lag of a tailer in the latest cycle allocates
// nothing.
func TestTailerLagAllocs(t *testing.T) {
	q := openT(t, t.TempDir(), Options{IndexSpacing: 4})
	for i := range 100 {
		if _, err := q.Append(msgOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	tl := tailerT(t, q)
	for range 40 {
		if _, _, err := tl.Next(); err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	allocs := testing.AllocsPerRun(100, func() { n, _ = tl.Lag() })
	if allocs != 0 || n != 60 {
		t.Fatalf("Lag: %d, %v allocations; want 60, 0", n, allocs)
	}
}

// TestStatsLag: Stats gives each named tailer the messages after its
// acknowledged index, across cycles; a tailer that acknowledged nothing
// lags by the whole queue retention kept.
func TestStatsLag(t *testing.T) {
	q, _, kept, _ := countQueue(t)
	a, err := q.NamedTailer("a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := q.NamedTailer("b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lags := func(wantA, wantB int64) {
		t.Helper()
		st, err := q.Stats()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, ts := range st.Tailers {
			got[ts.Name] = ts.Lag
		}
		if len(got) != 2 || got["a"] != wantA || got["b"] != wantB {
			t.Fatalf("Stats lags %v, want a %d, b %d", got, wantA, wantB)
		}
	}
	lags(120, 120)
	for range 45 { // into the second cycle kept
		if _, _, err := a.Next(); err != nil {
			t.Fatal(err)
		}
	}
	lags(120, 120) // read but not acknowledged
	if err := a.Ack(); err != nil {
		t.Fatal(err)
	}
	lags(75, 120)
	for range len(kept) {
		if _, _, err := b.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Ack(); err != nil {
		t.Fatal(err)
	}
	lags(75, 0)
	if _, err := q.Append([]byte("new")); err != nil {
		t.Fatal(err)
	}
	lags(76, 1)
}

// TestCountDamaged: a cycle file whose slots cannot be walked to their end
// (a message length past the file) fails Count over it, and Stats gives
// the named tailers a lag of -1; the cycles after it still count.
func TestCountDamaged(t *testing.T) {
	dir := t.TempDir()
	files := makeCycles(t, dir, 3, 10, zeros)
	q0, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q0.NamedTailer("a"); err != nil {
		t.Fatal(err)
	}
	q0.Close()
	// The length of the middle cycle's first message, past the file.
	pad := readWord(t, files[1], dataStart) & lenMask
	first := dataStart + slotSize(pad)
	writeWord(t, files[1], first, readWord(t, files[1], first)|lenMask)

	q, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cs, err := q.Cycles()
	if err != nil || len(cs) != 3 {
		t.Fatalf("cycles %v %v", cs, err)
	}
	if _, err := q.Count(0, math.MaxUint64); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Count over the damaged cycle: %v", err)
	}
	if n, err := q.Count(Index(cs[0], 0), Index(cs[1], 0)); n != 10 || err != nil {
		t.Fatalf("Count before the damaged cycle: %d %v", n, err)
	}
	if n, err := q.Count(Index(cs[2], 3), math.MaxUint64); n != 7 || err != nil {
		t.Fatalf("Count after the damaged cycle: %d %v", n, err)
	}
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tailers) != 1 || st.Tailers[0].Lag != -1 || st.Tailers[0].Err != nil {
		t.Fatalf("Stats tailers %+v, want a lag of -1", st.Tailers)
	}
	tl := tailerT(t, q)
	defer tl.Close()
	if _, err := tl.Lag(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Lag of a tailer before the damaged cycle: %v", err)
	}
	if err := tl.Seek(Index(cs[2], 4)); err != nil {
		t.Fatal(err)
	}
	if n, err := tl.Lag(); n != 6 || err != nil {
		t.Fatalf("Lag of a tailer after the damaged cycle: %d %v", n, err)
	}
}

// slotWalk walks a cycle file's slots from its raw words, as a check on
// the queue's own walk: where the slots up to each message's end
// (metadata slots, as the start pad and index arrays, are not messages),
// and where the slots end.
func slotWalk(t *testing.T, path string) (after []int64, end int64) {
	t.Helper()
	off := int64(dataStart)
	for {
		h := readWord(t, path, off)
		if h == 0 || h&flagEOF != 0 {
			return after, off
		}
		off += slotSize(h & lenMask)
		if h&flagMeta == 0 {
			after = append(after, off)
		}
	}
}

// TestStatsLagBytes: Stats gives each named tailer the slot bytes after
// its acknowledged message, from its position in its cycle to the end of
// the queue, and the creation time of the cycle file holding its first
// unacknowledged message, which bounds that message's age.
func TestStatsLagBytes(t *testing.T) {
	q, clk, kept, _ := countQueue(t)
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC) // newClock's start
	a, err := q.NamedTailer("a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	check := func(step string, wantSince time.Time) {
		t.Helper()
		st, err := q.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Tailers) != 1 {
			t.Fatalf("%s: tailers %+v", step, st.Tailers)
		}
		ts := st.Tailers[0]
		from := uint64(0)
		if ts.Any {
			from = ts.Acked
		}
		fc, fseq := SplitIndex(from)
		var want int64
		for _, c := range st.Cycles {
			after, end := slotWalk(t, c.Path)
			switch {
			case Index(c.Cycle, uint32(len(after))) <= from:
			case c.Cycle == fc && fseq > 0:
				want += end - after[fseq-1] // the slots after the acknowledged message
			default:
				want += end - dataStart
			}
		}
		if ts.LagBytes != want || !ts.UnackedSince.Equal(wantSince) {
			t.Fatalf("%s: lag %d messages, %d bytes since %v; want %d bytes since %v", step, ts.Lag, ts.LagBytes, ts.UnackedSince, want, wantSince)
		}
		if (ts.Lag == 0) != (want == 0) {
			t.Fatalf("%s: lag of %d messages and %d bytes", step, ts.Lag, want)
		}
	}
	// The cycles kept were made at t0+1m, t0+3m and t0+4m.
	check("nothing acknowledged", t0.Add(time.Minute))
	ack := func(n int) {
		t.Helper()
		for range n {
			if _, _, err := a.Next(); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	ack(13)
	check("inside the first cycle", t0.Add(time.Minute))
	ack(17)
	check("at the end of the first cycle", t0.Add(3*time.Minute))
	ack(1)
	check("inside the second cycle", t0.Add(3*time.Minute))
	ack(len(kept) - 31)
	check("caught up", time.Time{})
	clk.Advance(time.Minute)
	if _, err := q.Append([]byte("new")); err != nil {
		t.Fatal(err)
	}
	check("one new message in a new cycle", t0.Add(5*time.Minute))
}
