//go:build darwin || windows || (linux && offmap_portable)

package shm

import (
	"sync/atomic"
	"testing"
	"time"
)

// Another process changes a word without waking anyone here: a polling
// wait sees it at its next look, PollMax at most after the change (plus
// the timer's slack; Go's timers on Linux wake a millisecond late).
func TestPollSeesChangeWithoutWake(t *testing.T) {
	var w atomic.Uint32
	changed := make(chan time.Time, 1)
	go func() {
		time.Sleep(20 * time.Millisecond) // the waiter has backed off to PollMax
		changed <- time.Now()
		w.Store(1) // no FutexWake: as from another process
	}()
	FutexWait(&w, 0, 10*time.Second)
	late := time.Since(<-changed)
	if w.Load() != 1 {
		t.Fatal("FutexWait returned before the word changed")
	}
	if late > PollMax+50*time.Millisecond {
		t.Fatalf("a changed word seen %v late, want at most about %v", late, PollMax)
	}
}

// A wake from this process ends the wait at once, whatever the back-off.
func TestLocalWakeIsImmediate(t *testing.T) {
	var w atomic.Uint32
	done := make(chan struct{})
	go func() {
		FutexWait(&w, 0, 10*time.Second)
		close(done)
	}()
	time.Sleep(10 * time.Millisecond)
	w.Store(1)
	FutexWake(&w, 1)
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("FutexWake did not end the wait")
	}
}

func TestWaitvTimesOutAndChecksArguments(t *testing.T) {
	var a, b atomic.Uint32
	vec := make([]Waitv, 2)
	vec[0].SetWord(&a, 0)
	vec[1].SetWord(&b, 0)
	start := time.Now()
	if err := FutexWaitv(vec, 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("returned after %v with no word changed, want the 30ms timeout", d)
	}
	go func() { time.Sleep(5 * time.Millisecond); b.Store(7) }()
	start = time.Now()
	FutexWaitv(vec, 10*time.Second)
	if b.Load() != 7 || time.Since(start) > time.Second {
		t.Fatalf("FutexWaitv missed the second word's change (%v)", time.Since(start))
	}
	if FutexWaitv(nil, time.Second) == nil || FutexWaitv(make([]Waitv, MaxWaitv+1), time.Second) == nil {
		t.Fatal("FutexWaitv of no words or too many: no error")
	}
}
