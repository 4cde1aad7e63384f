package queue

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestIdleAppenderAfterRetention: an appender that stays idle while
// another rolls the queue and retention deletes the cycles after its own
// must not make a deleted cycle again. Its next append goes to the latest
// cycle, where a tailer reads it, and the other appender goes on.
func TestIdleAppenderAfterRetention(t *testing.T) {
	for _, tc := range []struct {
		idle   int  // days another appender rolls while this one is idle
		newDay bool // this one appends first on a day no one appended yet
	}{{2, false}, {2, true}, {3, false}, {5, false}, {5, true}} {
		t.Run(fmt.Sprintf("%d days, new day %v", tc.idle, tc.newDay), func(t *testing.T) {
			dir := t.TempDir()
			clk := newClock()
			opts := Options{Roll: Daily, KeepCycles: 1, clock: clk.Now}
			a := openT(t, dir, opts)
			b := openT(t, dir, opts)
			var want []string // the messages of the latest cycle
			appendT := func(q *Queue, m string) {
				t.Helper()
				if _, err := q.Append([]byte(m)); err != nil {
					t.Fatalf("append %s: %v", m, err)
				}
				want = append(want, m)
			}
			appendT(a, "a0")
			for day := 1; day <= tc.idle; day++ {
				clk.Advance(24 * time.Hour)
				want = want[:0]
				appendT(b, fmt.Sprint("b", day))
			}
			if cs, _ := b.Cycles(); len(cs) != 1 {
				t.Fatalf("cycles %v, want only the latest", cs)
			}
			if tc.newDay {
				clk.Advance(24 * time.Hour)
				want = want[:0]
			}
			appendT(a, "a1") // a's cycle and the one it names as its next are gone
			appendT(b, "b")
			appendT(a, "a2")
			r := openT(t, dir, Options{ReadOnly: true})
			_, msgs := readAll(t, tailerT(t, r))
			var got []string
			for _, m := range msgs {
				got = append(got, string(m))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %q, want %q", got, want)
			}
			// Both go on into the next days.
			for day := 1; day <= 2; day++ {
				clk.Advance(24 * time.Hour)
				want = want[:0]
				appendT(b, fmt.Sprint("b+", day))
				appendT(a, fmt.Sprint("a+", day))
			}
			_, msgs = readAll(t, tailerT(t, r))
			got = got[:0]
			for _, m := range msgs {
				got = append(got, string(m))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %q, want %q", got, want)
			}
			if cs, _ := r.Cycles(); len(cs) != 1 || cs[0] != a.cycleOf(clk.Now()) {
				t.Fatalf("cycles %v, want only %d", cs, a.cycleOf(clk.Now()))
			}
		})
	}
}

// TestRollRacesRetention: between an appender's check that the cycle it
// rolls to is not behind the latest and its making of that cycle's file,
// another appender makes it, rolls past it and retention deletes it. The
// file the first one makes then is an orphan: it deletes it and appends
// to the latest cycle instead. (The first one's clock lags, as a roll
// timer that has not fired yet does: it would append to the orphan
// before rolling on.)
func TestRollRacesRetention(t *testing.T) {
	dir := t.TempDir()
	clkA, clkB := newClock(), newClock()
	a := openT(t, dir, Options{Roll: Daily, KeepCycles: 2, clock: clkA.Now})
	b := openT(t, dir, Options{Roll: Daily, KeepCycles: 1, clock: clkB.Now})
	if _, err := a.Append([]byte("a0")); err != nil {
		t.Fatal(err)
	}
	clkA.Advance(24 * time.Hour)
	clkB.Advance(24 * time.Hour)
	raced := false
	beforeRollCreate = func(q *Queue, next uint32) {
		if q != a || raced {
			return
		}
		raced = true
		if _, err := b.Append([]byte("b1")); err != nil { // makes next
			t.Errorf("b1: %v", err)
		}
		clkB.Advance(24 * time.Hour)
		if _, err := b.Append([]byte("b2")); err != nil { // rolls past it, deletes it
			t.Errorf("b2: %v", err)
		}
	}
	defer func() { beforeRollCreate = nil }()
	if _, err := a.Append([]byte("a1")); err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the roll did not reach the hook")
	}
	latest := b.cycleOf(clkB.Now())
	if cs, _ := a.Cycles(); len(cs) != 1 || cs[0] != latest {
		t.Fatalf("cycles %v, want only %d", cs, latest)
	}
	r := openT(t, dir, Options{ReadOnly: true})
	_, msgs := readAll(t, tailerT(t, r))
	if fmt.Sprintf("%s", msgs) != "[b2 a1]" {
		t.Fatalf("read %s, want [b2 a1]", msgs)
	}
}

// TestRollRacesRetentionAfterCreate: as TestRollRacesRetention, but the
// other appender rolls on and retention deletes the orphan between its
// creation by the first appender and the first's opening of it (a paused
// appender under Wine met this). The first one goes on at the latest
// cycle instead of failing with the file not found.
func TestRollRacesRetentionAfterCreate(t *testing.T) {
	dir := t.TempDir()
	clkA, clkB := newClock(), newClock()
	a := openT(t, dir, Options{Roll: Daily, KeepCycles: 2, clock: clkA.Now})
	b := openT(t, dir, Options{Roll: Daily, KeepCycles: 1, clock: clkB.Now})
	if _, err := a.Append([]byte("a0")); err != nil {
		t.Fatal(err)
	}
	clkA.Advance(24 * time.Hour)
	clkB.Advance(24 * time.Hour)
	bAppends := func(m string) {
		clkB.Advance(24 * time.Hour)
		if _, err := b.Append([]byte(m)); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	raced, deleted := false, false
	beforeRollCreate = func(q *Queue, next uint32) {
		if q == a && !raced {
			raced = true
			if _, err := b.Append([]byte("b1")); err != nil { // makes next
				t.Errorf("b1: %v", err)
			}
			bAppends("b2") // rolls past it, deletes it
		}
	}
	afterCycleCreate = func(q *Queue, n uint32) {
		if q == a && raced && !deleted {
			deleted = true
			bAppends("b3") // rolls on, deletes a's new file
		}
	}
	defer func() { beforeRollCreate, afterCycleCreate = nil, nil }()
	if _, err := a.Append([]byte("a1")); err != nil {
		t.Fatal(err)
	}
	if !deleted {
		t.Fatal("the roll did not reach the hooks")
	}
	latest := b.cycleOf(clkB.Now())
	if cs, _ := a.Cycles(); len(cs) != 1 || cs[0] != latest {
		t.Fatalf("cycles %v, want only %d", cs, latest)
	}
	r := openT(t, dir, Options{ReadOnly: true})
	_, msgs := readAll(t, tailerT(t, r))
	if fmt.Sprintf("%s", msgs) != "[b3 a1]" {
		t.Fatalf("read %s, want [b3 a1]", msgs)
	}
}

// TestTailerPassesOrphan: a cycle file made again after retention deleted
// it (as appenders before this fix did) holds nothing and is never sealed;
// a tailer from the start passes over it instead of waiting in it.
func TestTailerPassesOrphan(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	q := openT(t, dir, Options{Roll: Daily, KeepCycles: 1, clock: clk.Now})
	for day := range 3 {
		if _, err := q.Append([]byte(fmt.Sprint("m", day))); err != nil {
			t.Fatal(err)
		}
		clk.Advance(24 * time.Hour)
	}
	cs, _ := q.Cycles()
	if len(cs) != 1 {
		t.Fatalf("cycles %v", cs)
	}
	orphan := cs[0] - 1
	if err := q.createCycle(q.cyclePath(orphan), orphan, uint64(orphan)); err != nil {
		t.Fatal(err)
	}
	tl := tailerT(t, q)
	if _, m, err := tl.Next(); err != nil || string(m) != "m2" {
		t.Fatalf("first message: %q %v, want m2", m, err)
	}
	os.Remove(q.cyclePath(orphan)) // closeChecked would see the fork
}

// TestLatestDeletedAsItIsOpened: between a process's load of the latest
// cycle and the opening of its file, the queue rolls on twice and
// retention deletes that cycle (the process was paused there). SeekEnd
// and a left-behind appender go on from the newer latest, not fail with
// the file not found. (A paused appender under Wine met it.)
func TestLatestDeletedAsItIsOpened(t *testing.T) {
	dir := t.TempDir()
	clkW, clkR := newClock(), newClock()
	w := openT(t, dir, Options{Roll: Daily, KeepCycles: 1, clock: clkW.Now})
	r := openT(t, dir, Options{Roll: Daily, clock: clkR.Now})
	if _, err := w.Append([]byte("day 0")); err != nil {
		t.Fatal(err)
	}
	rollTwice := func(q *Queue) {
		if q != r {
			return
		}
		afterLatestLoad = nil
		for _, m := range []string{"day 1", "day 2"} {
			clkW.Advance(24 * time.Hour)
			if _, err := w.Append([]byte(m)); err != nil {
				t.Errorf("%s: %v", m, err)
			}
		}
	}
	defer func() { afterLatestLoad = nil }()

	afterLatestLoad = rollTwice
	tl := tailerT(t, r)
	if err := tl.SeekEnd(); err != nil {
		t.Fatalf("SeekEnd as the latest cycle is deleted: %v", err)
	}
	if _, err := w.Append([]byte("day 2, later")); err != nil {
		t.Fatal(err)
	}
	if _, m, err := tl.Next(); err != nil || string(m) != "day 2, later" {
		t.Fatalf("after SeekEnd: %q, %v", m, err)
	}

	// r's appender is in cycle 0, which the queue left: it moves to the
	// latest, which is deleted as it opens it.
	afterLatestLoad = rollTwice
	clkR.Advance(4 * 24 * time.Hour)
	if _, err := r.Append([]byte("from r")); err != nil {
		t.Fatalf("Append of a process left behind as the latest cycle is deleted: %v", err)
	}
}
