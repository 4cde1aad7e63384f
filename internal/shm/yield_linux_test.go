package shm

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BackgroundThread leaves its goroutine on a thread of nice 19, and other
// threads as they were.
func TestBackgroundThread(t *testing.T) {
	before, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		if err := BackgroundThread(); err != nil {
			t.Error(err)
		}
		// getpriority returns 20 - nice, to stay positive.
		p, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		got <- 20 - p
		// The goroutine ends locked to its thread: Go then ends the
		// thread, so the low priority cannot leak to other goroutines.
	}()
	if nice := <-got; nice != 19 {
		t.Errorf("background thread at nice %d, want 19", nice)
	}
	if after, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid()); after != before {
		t.Errorf("this thread's priority changed from %d to %d", before, after)
	}
}
