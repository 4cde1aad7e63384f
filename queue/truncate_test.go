package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/testfs"
)

// TestTruncatedWhileOpen truncates a cycle file below what a writer and
// two readers have mapped (above the last message, so that nothing reads
// a page the file lost): each finds out where it checks the file's size,
// and reports ErrTruncated, not a fault. The writer's append that needs
// more of the file fails rather than grow the file back over the loss.
func TestTruncatedWhileOpen(t *testing.T) {
	defer func(d time.Duration) { fileRecheck = d }(fileRecheck)
	fileRecheck = 20 * time.Millisecond
	defer func(g func() int) { startPadLines = g }(startPadLines)
	startPadLines = func() int { return 1 }
	dir := t.TempDir()
	open := func(o Options) *Queue {
		q, err := Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	const block = 16 << 10
	w := open(Options{BlockSize: block, MaxCycleSize: 1 << 20})
	msg := make([]byte, 100)
	end := func() int64 {
		_, off, err := w.wcur.Load().end()
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	// Append until the first free slot is early in a block: the page after
	// it is then inside the file, and the block's end further on.
	for n := 0; n < 100 || (end()+8)%block >= block-2*pageSize; n++ {
		if _, err := w.Append(msg); err != nil {
			t.Fatal(err)
		}
	}
	cut := (end() + 8 + pageSize - 1) &^ (pageSize - 1)
	// The pretoucher grows the file ahead of the appends on its own
	// thread: let it finish, so that the cut below comes after its last
	// growth, as a truncation by another process would.
	for w.wcur.Load().ahead.Load() {
		time.Sleep(time.Millisecond)
	}

	ro := open(Options{ReadOnly: true})
	rw := open(Options{})
	rw2 := open(Options{})
	// The read-only reader parks; the others block, all at once, two of
	// them in one Queue (so on one cycle, checked once for both).
	var tailers []*Tailer
	for _, q := range []*Queue{ro, rw, rw, rw2} {
		tl := tailerT(t, q)
		readAll(t, tl)
		tailers = append(tailers, tl)
		if mapped := int64(len(tl.mem)); cut >= mapped {
			t.Fatalf("cut at %d, but a reader maps only %d", cut, mapped)
		}
	}
	// A WaitSet watches one more, in its own Queue.
	rw3 := open(Options{})
	inSet := tailerT(t, rw3)
	readAll(t, inSet)
	if mapped := int64(len(inSet.mem)); cut >= mapped {
		t.Fatalf("cut at %d, but the set's tailer maps only %d", cut, mapped)
	}
	set := NewWaitSet()
	set.Add(inSet)
	defer set.Remove(inSet)
	// A tailer of another queue sleeps beside them, on the same notifier:
	// it is not told of a truncation and still gets its message.
	other, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	bystander := tailerT(t, other)
	bystanderDone := make(chan error, 1)
	go func() { bystanderDone <- bystander.Wait(context.Background(), Block) }()
	path := w.cyclePath(w.wcur.Load().num)
	if testfs.CutRefused(t, os.Truncate(path, cut)) {
		if _, err := ro.Check(); err != nil {
			t.Fatalf("Check after a refused cut: %v", err)
		}
		if _, err := w.Append(msg); err != nil {
			t.Fatalf("Append after a refused cut: %v", err)
		}
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	errs := make(chan error, len(tailers))
	for i, tl := range tailers {
		mode := Block
		if i == 0 {
			mode = Park
		}
		go func() { errs <- tl.Wait(ctx, mode) }()
	}
	go func() {
		got, err := set.Wait(ctx, nil)
		if err == nil && (len(got) != 1 || got[0] != inSet) {
			err = fmt.Errorf("WaitSet.Wait returned %d tailers", len(got))
		}
		if err == nil {
			_, _, err = inSet.Next()
		}
		errs <- err
	}()
	for range len(tailers) + 1 {
		if err := <-errs; !errors.Is(err, ErrTruncated) {
			t.Errorf("Wait on the truncated file: %v, want ErrTruncated", err)
		}
	}
	// The error was returned once; the tailer reads on as before.
	if _, _, err := inSet.Next(); err != ErrNoMessage {
		t.Errorf("Next after ErrTruncated: %v, want ErrNoMessage", err)
	}
	cancel()
	if _, err := other.Append([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	if err := <-bystanderDone; err != nil {
		t.Errorf("the other queue's tailer: %v", err)
	} else if _, m, err := bystander.Next(); err != nil || string(m) != "still here" {
		t.Errorf("the other queue's tailer read %q, %v", m, err)
	}
	if _, err := ro.Check(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated while in use") {
		t.Errorf("Check: %v, want the truncation named", err)
	}
	if st, err := ro.Stats(); err != nil || len(st.Cycles) != 1 || !errors.Is(st.Cycles[0].Err, ErrTruncated) {
		t.Errorf("Stats: %+v, %v; want the cycle's Err ErrTruncated", st.Cycles, err)
	}
	if err := tailers[0].SeekEnd(); !errors.Is(err, ErrTruncated) {
		t.Errorf("SeekEnd: %v, want ErrTruncated", err)
	}
	if _, err := w.Append(make([]byte, 3*block)); !errors.Is(err, ErrTruncated) {
		t.Errorf("Append past the cut: %v, want ErrTruncated", err)
	}
	if st, _ := os.Stat(path); st.Size() != cut {
		t.Errorf("the file grew back to %d bytes", st.Size())
	}
}
