package queue

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The pretoucher keeps the append cycle's file grown and faulted in about
// a block ahead of the appends, on a thread of the lowest priority.
func TestPretouchAhead(t *testing.T) {
	const block = 64 << 10
	q := openT(t, t.TempDir(), Options{BlockSize: block})
	msg := make([]byte, 100)
	for range 1000 { // about 110 KiB: past the first block
		if _, err := q.Append(msg); err != nil {
			t.Fatal(err)
		}
	}
	c := q.wcur.Load()
	_, end := c.hintPos()
	deadline := time.Now().Add(10 * time.Second)
	for c.touched.Load() < end+block/2 {
		if time.Now().After(deadline) {
			t.Fatalf("pages faulted in up to %d, appends at %d: the pretoucher did not get ahead", c.touched.Load(), end)
		}
		time.Sleep(time.Millisecond)
	}
	st, err := os.Stat(q.cyclePath(c.num))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < c.touched.Load() {
		t.Errorf("file of %d bytes, pages faulted in up to %d", st.Size(), c.touched.Load())
	}
	if runtime.GOOS != "linux" {
		return // threadsAtNice reads /proc; internal/shm tests BackgroundThread
	}
	if n := threadsAtNice(t, 19); n == 0 {
		t.Error("no thread of this process runs at nice 19: the pretoucher is not in the background")
	}
}

// A pretouch round during which the appends moved on more than half a
// block reports that another is due: the pretoucher goes again instead of
// waiting for a request that was dropped while it worked.
func TestPretouchAgain(t *testing.T) {
	const block = 64 << 10
	q := openT(t, t.TempDir(), Options{BlockSize: block})
	msg := make([]byte, 100)
	if _, err := q.Append(msg); err != nil {
		t.Fatal(err)
	}
	c := q.wcur.Load()
	// Keep the background pretoucher off this cycle: take the pending
	// flag as a request would, once it is free.
	for !c.ahead.CompareAndSwap(false, true) {
		time.Sleep(time.Millisecond)
	}
	c.pretouch()
	if c.pretouch() {
		t.Fatal("another round wanted with the appends where the last one left them")
	}
	c.afterPopulate = func() {
		c.afterPopulate = nil
		for start := c.appendEnd(); c.appendEnd() < start+block*3/4; {
			if _, err := q.Append(msg); err != nil {
				t.Error(err)
				return
			}
		}
	}
	if !c.pretouch() {
		t.Fatal("no further round wanted after the appends moved on three quarters of a block during one")
	}
	if c.pretouch() {
		t.Fatal("another round wanted right after catching up")
	}
	if c.touched.Load() < c.appendEnd()+block/2 {
		t.Fatalf("pages faulted in up to %d, appends at %d", c.touched.Load(), c.appendEnd())
	}
	c.ahead.Store(false)
}

// Prepare faults in the block the first appends will write, before them.
func TestPrepareFaultsInTheFirstBlock(t *testing.T) {
	const block = 64 << 10
	q := openT(t, t.TempDir(), Options{BlockSize: block})
	if err := q.Prepare(); err != nil {
		t.Fatal(err)
	}
	c := q.wcur.Load()
	if got, want := c.touched.Load(), c.appendEnd()+block; got < want {
		t.Fatalf("after Prepare, pages faulted in up to %d, want %d", got, want)
	}
}

// threadsAtNice counts this process's threads of the given nice value
// (field 19 of /proc/self/task/TID/stat).
func threadsAtNice(t *testing.T, nice int) int {
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 on
		if len(f) > 16 {
			if v, err := strconv.Atoi(f[16]); err == nil && v == nice {
				n++
			}
		}
	}
	return n
}
