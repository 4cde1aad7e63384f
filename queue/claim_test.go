package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
)

// TestInterleavedAppenders: two opens of one queue each remember where
// their own last append ended; when the other has appended meanwhile, the
// next claim must walk past its messages, never over them.
func TestInterleavedAppenders(t *testing.T) {
	dir := t.TempDir()
	a := openT(t, dir, Options{})
	b := openT(t, dir, Options{})
	const n = 20000
	for i := range n {
		q := a
		if i%3 == 0 || i%7 == 0 {
			q = b
		}
		msg := binary.LittleEndian.AppendUint32(nil, uint32(i))
		msg = append(msg, bytes.Repeat([]byte{byte(i)}, i%50)...)
		if _, err := q.Append(msg); err != nil {
			t.Fatal(err)
		}
	}
	tl := tailerT(t, a)
	for i := range n {
		_, msg, err := tl.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got := binary.LittleEndian.Uint32(msg); got != uint32(i) || len(msg) != 4+i%50 {
			t.Fatalf("message %d reads as %d (%d bytes)", i, got, len(msg))
		}
	}
	if _, _, err := tl.Next(); err != ErrNoMessage {
		t.Fatalf("after %d messages: %v", n, err)
	}
}

func TestPrepare(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{})
	if cs, _ := q.Cycles(); len(cs) != 0 {
		t.Fatalf("a new queue has cycle files %v", cs)
	}
	if err := q.Prepare(); err != nil {
		t.Fatal(err)
	}
	if cs, _ := q.Cycles(); len(cs) != 1 {
		t.Fatalf("after Prepare: cycle files %v", cs)
	}
	if err := q.Prepare(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Prepare(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Prepare of a read-only queue: %v", err)
	}
}

// TestOpenRace has goroutines (each its own open, as processes would be)
// create the same queue at once: all must open it.
func TestOpenRace(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir() + "/q"
		var wg sync.WaitGroup
		errs := make([]error, 8)
		qs := make([]*Queue, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				qs[i], errs[i] = Open(dir, Options{})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, opener %d: %v", round, i, err)
			}
			qs[i].Close()
		}
	}
}
