package queue

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// testdata/amd64-queue and testdata/windows-amd64-queue are small queues
// written on linux/amd64 and windows/amd64 by TestWriteCrossArchQueue
// (run with OFFQUEUE_WRITE_TESTDATA=1 on either to write its own again):
// byte messages, typed messages, two daily cycles and a named tailer that
// acknowledged part of them. TestCrossArchQueue opens a copy of each and
// reads it all: on linux/amd64 that guards the format against silent
// change; under qemu-aarch64 and Wine in CI it shows that a queue written
// on one architecture or system is read on the other (every word of the
// format is little endian and at a fixed offset).

// crossArchDir is the checked-in queue written on this system.
func crossArchDir() string {
	if runtime.GOOS == "windows" {
		return "testdata/windows-amd64-queue"
	}
	return "testdata/amd64-queue"
}

// crossArchMessages is what the checked-in queue holds, in order: in each
// of two cycles, ten byte messages, each followed by a trade.
func crossArchMessages() (bytesMsgs [][]byte) {
	for c := range 2 {
		for i := range 10 {
			bytesMsgs = append(bytesMsgs, fmt.Appendf(nil, "cycle %d message %d %s", c, i, string(make([]byte, i*7))))
		}
	}
	return bytesMsgs
}

func TestWriteCrossArchQueue(t *testing.T) {
	if os.Getenv("OFFQUEUE_WRITE_TESTDATA") == "" {
		t.Skip("writes testdata: set OFFQUEUE_WRITE_TESTDATA=1")
	}
	if runtime.GOARCH != "amd64" {
		t.Fatal("the checked-in queue is written on amd64")
	}
	os.RemoveAll(crossArchDir())
	msgs := crossArchMessages()
	clk := newClock()
	q, err := Open(crossArchDir(), Options{Roll: Daily, MaxCycleSize: 64 << 10, BlockSize: 4096, clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	a, err := NewAppender[trade](q)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 2 {
		if c > 0 {
			clk.Advance(24 * time.Hour)
		}
		for i := range 10 {
			if _, err := q.Append(msgs[c*10+i]); err != nil {
				t.Fatal(err)
			}
			v := tradeOf(c*10 + i)
			if _, err := a.Append(&v); err != nil {
				t.Fatal(err)
			}
		}
	}
	tl, err := q.NamedTailer("billing")
	if err != nil {
		t.Fatal(err)
	}
	for range 24 {
		if _, _, err := tl.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tl.Ack(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestCrossArchQueue(t *testing.T) {
	for _, made := range []string{"testdata/amd64-queue", "testdata/windows-amd64-queue"} {
		t.Run(filepath.Base(made), func(t *testing.T) { testCrossArchQueue(t, made) })
	}
}

func testCrossArchQueue(t *testing.T, made string) {
	dir := filepath.Join(t.TempDir(), "q")
	if err := os.CopyFS(dir, os.DirFS(made)); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			os.Chmod(p, map[bool]os.FileMode{true: 0o755, false: 0o644}[d.IsDir()])
		}
		return err
	})
	msgs := crossArchMessages()
	q := openT(t, dir, Options{})
	cycles, err := q.Cycles()
	if err != nil || len(cycles) != 2 || cycles[1] != cycles[0]+1 {
		t.Fatalf("cycles %v %v, want two in a row", cycles, err)
	}
	tl := tailerT(t, q)
	r, err := NewReader[trade](tl)
	if err != nil {
		t.Fatal(err)
	}
	for c, n := range cycles {
		for i := range 10 {
			idx, m, err := tl.Next()
			if err != nil || string(m) != string(msgs[c*10+i]) || idx != Index(n, uint32(2*i)) {
				t.Fatalf("cycle %d, message %d: %d %q %v", n, 2*i, idx, m, err)
			}
			var v trade
			if idx, err := r.Next(&v); err != nil || v != tradeOf(c*10+i) || idx != Index(n, uint32(2*i+1)) {
				t.Fatalf("cycle %d, trade %d: %d %+v %v", n, 2*i+1, idx, v, err)
			}
		}
	}
	if _, _, err := tl.Next(); err != ErrNoMessage {
		t.Fatalf("past the end: %v", err)
	}
	// The named tailer resumes after the 24 messages it acknowledged.
	named, err := q.NamedTailer("billing")
	if err != nil {
		t.Fatal(err)
	}
	if idx, m, err := named.Next(); err != nil || idx != Index(cycles[1], 4) || string(m) != string(msgs[12]) {
		t.Fatalf("named tailer resumed at %d %q %v, want message 4 of cycle %d", idx, m, err, cycles[1])
	}
	// And this architecture appends to it.
	if _, err := q.Append([]byte("appended on " + runtime.GOARCH)); err != nil {
		t.Fatal(err)
	}
	if _, m, err := tl.Next(); err != nil || string(m) != "appended on "+runtime.GOARCH {
		t.Fatalf("read back %q %v", m, err)
	}
}
