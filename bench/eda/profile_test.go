package eda

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// firstWrite is a buffer that notes when it was first written to.
type firstWrite struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first time.Time
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() {
		w.first = time.Now()
	}
	return w.buf.Write(p)
}

// TestProfileRuns: the profile covers the measured span only, and a run
// that ends before that span says it took none.
func TestProfileRuns(t *testing.T) {
	var w firstWrite
	start := time.Now().Add(200 * time.Millisecond)
	stop := profileRuns(&w, start, start.Add(200*time.Millisecond))
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond) // until the span is over: stop then finds it done
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.buf.Bytes(); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("not a gzipped profile: %d bytes", len(b))
	}
	if w.first.Before(start) {
		t.Fatalf("the profile was written from %v, before its span began at %v", w.first, start)
	}

	var early bytes.Buffer
	stop = profileRuns(&early, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	if err := stop(); err == nil || !strings.Contains(err.Error(), "no CPU profile") || early.Len() != 0 {
		t.Fatalf("a run that ended first: %v, %d bytes", err, early.Len())
	}
}
