package queue

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCloseWithOpenReservation: Close of a queue with a reservation
// neither committed nor aborted returns, aborts it (a reader in another
// handle goes past it), names it in an ErrUncommitted, and the late
// Commit and Abort are errors, not faults.
func TestCloseWithOpenReservation(t *testing.T) {
	defer func(d time.Duration) { closeWait = d }(closeWait)
	closeWait = 50 * time.Millisecond
	dir := t.TempDir()
	q, err := Open(dir, Options{SkipAfter: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w, err := q.Reserve(16)
	if err != nil {
		t.Fatal(err)
	}
	copy(w.Bytes(), "never committed")
	w2, err := q.Reserve(4)
	if err != nil {
		t.Fatal(err)
	}
	after, err := q.Append([]byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	w2.Abort()
	reader := openT(t, dir, Options{})
	tl := tailerT(t, reader)
	if _, _, err := tl.Next(); err != ErrNoMessage {
		t.Fatalf("before Close: %v, want ErrNoMessage (the reservation is open)", err)
	}

	done := make(chan error, 1)
	go func() { done <- q.Close() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting on the reservation after 10 s")
	}
	want := w.Index()
	c, s := SplitIndex(want)
	if !errors.Is(err, ErrUncommitted) || !strings.Contains(err.Error(), fmt.Sprintf("%d:%d", c, s)) {
		t.Fatalf("Close: %v, want ErrUncommitted naming %d:%d", err, c, s)
	}
	copy(w.Bytes(), "written late") // still mapped: no fault
	if _, err := w.Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close: %v, want ErrClosed", err)
	}
	w.Abort() // a no-op after Commit

	idx, m, err := tl.Next()
	if err != nil || idx != after || string(m) != "after" {
		t.Fatalf("after Close: %#x %q %v, want %#x \"after\"", idx, m, err, after)
	}
	lost, err := reader.Check()
	if err != nil || len(lost) != 1 || lost[0] != (IndexRange{want, want + 2}) {
		t.Fatalf("Check: %v %v, want the two reservations lost", lost, err)
	}
}
