package queue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWaitModes(t *testing.T) {
	// No wait may rely on its once-a-second file check to notice an
	// append or a cancellation.
	defer func(d time.Duration) { fileRecheck = d }(fileRecheck)
	fileRecheck = time.Hour
	for _, mode := range []WaitMode{Block, Spin, Yield, Park, BlockThread} {
		q := openT(t, t.TempDir(), Options{ParkMin: 50 * time.Microsecond, ParkMax: time.Millisecond})
		tl := tailerT(t, q)
		done := make(chan error)
		go func() { done <- tl.Wait(context.Background(), mode) }()
		q.Append([]byte("wake"))
		if err := <-done; err != nil {
			t.Fatalf("mode %v: %v", mode, err)
		}
		if _, m, _ := tl.Next(); string(m) != "wake" {
			t.Fatalf("mode %v: read %q", mode, m)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- tl.Wait(ctx, mode) }()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("mode %v, cancelled: %v", mode, err)
		}
		if st, err := q.Stats(); err != nil || mode == BlockThread && st.Watchers != 0 {
			t.Fatalf("mode %v: %d watchers left after the waits, %v", mode, st.Watchers, err)
		}
	}
}

// TestWaitModeUnknown: a mode out of range is an error, not a busy poll
// that never yields; each mode has its own name.
func TestWaitModeUnknown(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	tl := tailerT(t, q)
	for _, mode := range []WaitMode{-1, BlockThread + 1} {
		if err := tl.Wait(context.Background(), mode); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Wait(%v): %v, want ErrInvalidOptions", mode, err)
		}
	}
	names := map[string]WaitMode{}
	for _, mode := range []WaitMode{Block, Spin, Yield, Park, BlockThread, -1} {
		s := mode.String()
		if prev, ok := names[s]; ok {
			t.Errorf("%d and %d are both called %q", prev, mode, s)
		}
		names[s] = mode
	}
	if got := Park.String(); got != "park" {
		t.Errorf("Park.String() = %q", got)
	}
}

// TestBlockThreadClose: Close wakes a tailer asleep in BlockThread, whose
// Wait returns ErrClosed, before it unmaps the doorbell.
func TestBlockThreadClose(t *testing.T) {
	defer func(d time.Duration) { fileRecheck = d }(fileRecheck)
	fileRecheck = time.Hour
	q := openT(t, t.TempDir(), Options{BlockSpin: -1})
	tl := tailerT(t, q)
	done := make(chan error)
	go func() { done <- tl.Wait(context.Background(), BlockThread) }()
	for q.threadWaiters.Load() == 0 {
		time.Sleep(time.Millisecond) // until it is counted; it may not be asleep yet
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
	if err := tl.Wait(context.Background(), BlockThread); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait on a closed queue: %v", err)
	}
}

// TestWaitFollowsRoll: a blocked tailer at the end of a cycle wakes when
// an appender rolls and appends to the next cycle.
func TestWaitFollowsRoll(t *testing.T) {
	clk := newClock()
	q := openT(t, t.TempDir(), Options{Roll: Minutely, clock: clk.Now})
	q.Append([]byte("a"))
	tl := tailerT(t, q)
	tl.Next()
	done := make(chan error)
	go func() { done <- tl.Wait(context.Background(), Block) }()
	clk.Advance(time.Minute)
	q.Append([]byte("b"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, m, _ := tl.Next(); string(m) != "b" {
		t.Fatalf("read %q", m)
	}
}

func TestWaitSet(t *testing.T) {
	var qs []*Queue
	var ts []*Tailer
	set := NewWaitSet()
	for i := 0; i < 5; i++ {
		q := openT(t, t.TempDir(), Options{})
		tl := tailerT(t, q)
		qs, ts = append(qs, q), append(ts, tl)
		set.Add(tl)
	}
	qs[1].Append([]byte("one"))
	qs[3].Append([]byte("three"))
	ready, err := set.Wait(context.Background(), nil)
	if err != nil || len(ready) != 2 {
		t.Fatalf("ready %d tailers, %v", len(ready), err)
	}
	got := map[*Tailer]bool{ready[0]: true, ready[1]: true}
	if !got[ts[1]] || !got[ts[3]] {
		t.Fatal("Wait returned the wrong tailers")
	}
	ts[1].Next() // ts[3] is not drained: returned again
	done := make(chan []*Tailer)
	go func() {
		r, _ := set.Wait(context.Background(), ready)
		done <- r
	}()
	if r := <-done; len(r) != 1 || r[0] != ts[3] {
		t.Fatalf("undrained tailer not returned again: %d", len(r))
	}
	ts[3].Next()
	go func() {
		r, _ := set.Wait(context.Background(), ready)
		done <- r
	}()
	qs[4].Append([]byte("four"))
	if r := <-done; len(r) != 1 || r[0] != ts[4] {
		t.Fatalf("blocked Wait woke with %d tailers", len(r))
	}
	set.Remove(ts[4])
	ts[4].Next()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := set.Wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v", err)
	}
}

// TestCrossProcessWake: a helper process blocks on the queue; an append
// here wakes it through the doorbell and its notifier (Block) or on the
// doorbell itself (BlockThread). The helper's own rechecks are an hour
// apart: only the wake-up can end its wait.
func TestCrossProcessWake(t *testing.T) {
	for _, mode := range []WaitMode{Block, BlockThread} {
		t.Run(map[WaitMode]string{Block: "Block", BlockThread: "BlockThread"}[mode], func(t *testing.T) { crossProcessWake(t, mode) })
	}
}

func crossProcessWake(t *testing.T, mode WaitMode) {
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Fast})
	q.Append([]byte("old"))
	cmd := helperCmd(t, "wait-once", dir, 3600, int(mode))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "waiting" {
		t.Fatalf("helper said %q", sc.Text())
	}
	// The helper counts itself among the sleepers after its spin and
	// before it checks for data, so this append either is seen by that
	// check or rings.
	for deadline := time.Now().Add(20 * time.Second); q.sleepers.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the helper never counted itself among the doorbell's sleepers")
		}
	}
	q.Append([]byte("new"))
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "got new") {
		t.Fatalf("helper said %q", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// An appender killed between making the doorbell odd and its FUTEX_WAKE
// leaves the watcher of another process asleep, and the appends after it
// see a wake-up pending and skip the system call. The watcher must still
// wake: on its own within bellRecheck (TestWakeAfterDeadRinger), or at
// once when appends go on (TestDeadRingerRescuedByAppends, where the
// watcher's recheck is an hour).
func TestWakeAfterDeadRinger(t *testing.T) { deadRinger(t, 1, 0) }

func TestDeadRingerRescuedByAppends(t *testing.T) { deadRinger(t, staleRings+1, 3600) }

func deadRinger(t *testing.T, appends int, recheckSeconds int) {
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Fast})
	q.Append([]byte("old"))
	args := []any{}
	if recheckSeconds > 0 {
		args = append(args, recheckSeconds)
	}
	cmd := helperCmd(t, "wait-once", dir, args...)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "waiting" {
		t.Fatalf("helper said %q", sc.Text())
	}
	waitForWatcher(t, q, cmd.Process.Pid, 2) // its notifier sleeps on {control word, doorbell}
	// The dead ringer's half of ring(): the doorbell made odd, no wake.
	if b := q.bell.Load(); b&1 != 0 || !q.bell.CompareAndSwap(b, b+1) {
		t.Fatalf("doorbell %d changed under the test", b)
	}
	for i := range appends {
		q.Append(fmt.Appendf(nil, "new %d", i))
	}
	got := make(chan string, 1)
	go func() {
		sc.Scan()
		got <- sc.Text()
	}()
	select {
	case line := <-got:
		if line != "got new 0" {
			t.Fatalf("helper said %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the blocked tailer was not woken 20s after %d appends that followed a dead ringer", appends)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestDeadWriterProcess: a helper process reserves a slot and is killed
// before committing; readers skip the slot and read what follows.
func TestDeadWriterProcess(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Fast, SkipAfter: 2 * time.Millisecond})
	tl := tailerT(t, q)
	q.Append([]byte("before"))
	cmd := helperCmd(t, "reserve-and-hang", dir)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Scan()
	q.Append([]byte("after"))
	cmd.Process.Kill()
	cmd.Wait()
	var got []string
	for len(got) < 2 {
		if err := tl.Wait(context.Background(), Block); err != nil {
			t.Fatal(err)
		}
		_, m, _ := tl.Next()
		got = append(got, string(m))
	}
	if got[0] != "before" || got[1] != "after" {
		t.Fatalf("read %q", got)
	}
}

// TestUntilRecheckAligned: blocked tailers' file rechecks end on common
// instants (multiples of fileRecheck), so that a process's many timers
// fire together.
func TestUntilRecheckAligned(t *testing.T) {
	for range 100 {
		before := mono()
		d := untilRecheck()
		after := mono()
		if d <= 0 || d > fileRecheck {
			t.Fatalf("untilRecheck() = %v, want in (0, %v]", d, fileRecheck)
		}
		// The deadline lies in [before+d, after+d] and is a multiple.
		lo, hi := before+int64(d), after+int64(d)
		if r := hi % int64(fileRecheck); r > hi-lo {
			t.Fatalf("deadline %d is %d ns past a multiple of %v", hi, r, fileRecheck)
		}
	}
}

// TestUntilCheck: a notifier round that is already due waits the least
// positive time, never the zero or negative timeout that the polling
// FutexWaitv takes for "no limit".
func TestUntilCheck(t *testing.T) {
	now := mono()
	if d := untilCheck(now - int64(time.Second)); d != 1 {
		t.Fatalf("a round a second overdue waits %v, want 1ns", d)
	}
	if d := untilCheck(now + int64(time.Hour)); d <= 59*time.Minute || d > time.Hour {
		t.Fatalf("a round an hour ahead waits %v", d)
	}
}
