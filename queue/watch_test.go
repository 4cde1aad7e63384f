package queue

import (
	"bufio"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestWatchCyclesAcrossProcesses: a process that only reads learns of
// every cycle another process rolls to and every one its retention
// deletes, once each and in order.
func TestWatchCyclesAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	q := openT(t, dir, Options{Roll: Minutely, clock: clk.Now, KeepCycles: 2})
	q.Append(msgOf(0))
	first := q.wcur.Load().num

	cmd := helperCmd(t, "watch-cycles", dir)
	stdin, _ := cmd.StdinPipe()
	pipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		out := bufio.NewScanner(pipe)
		for out.Scan() {
			lines <- out.Text()
		}
		close(lines)
	}()
	// expect reads as many lines as want has and checks they are want's,
	// in any order: a roll's new file and retention's deletion may come
	// in one look or two.
	expect := func(want ...string) {
		t.Helper()
		var got []string
		for range want {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the watcher stopped after %q, want %q", got, want)
				}
				got = append(got, l)
			case <-time.After(10 * time.Second):
				t.Fatalf("the watcher said %q within 10 s, want %q", got, want)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("the watcher said %q, want %q", got, want)
		}
	}
	expect("watching")
	expect(fmt.Sprint("created ", first)) // the cycle there when it began
	for c := 1; c <= 5; c++ {
		clk.Advance(time.Minute)
		q.Append(msgOf(c)) // rolls to a new cycle; retention keeps 2
		n := first + uint32(c)
		if c >= 2 {
			expect(fmt.Sprint("deleted ", n-2), fmt.Sprint("created ", n))
		} else {
			expect(fmt.Sprint("created ", n))
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if extra, ok := <-lines; ok {
		t.Fatalf("the watcher said more: %q", extra)
	}
}

// TestDiffCycles: deletions first, then creations, each in cycle order.
func TestDiffCycles(t *testing.T) {
	got := diffCycles([]uint32{3, 4, 5}, []uint32{5, 6, 7})
	want := []cycleChange{{CycleDeleted, 3}, {CycleDeleted, 4}, {CycleCreated, 6}, {CycleCreated, 7}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("diffCycles = %v, want %v", got, want)
	}
}
