package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/queue"
)

// truncatedQueue makes a queue of n messages and returns its directory,
// its cycle file and a writer holding it open.
func truncatedQueue(t *testing.T, n int) (dir, cycle string, w *queue.Queue) {
	t.Helper()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "message %06d\n", i)
	}
	dir = newQueue(t, lines.String())
	cycle = filepath.Join(dir, cycleFile(t, dir))
	w, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := w.Append([]byte("from the writer")); err != nil {
		t.Fatal(err)
	}
	return dir, cycle, w
}

// oneLine checks that a command that failed printed one error line on
// stderr holding one of wants.
func oneLine(t *testing.T, what, stderr string, code int, wants ...string) {
	t.Helper()
	ok := code == 2 && strings.HasPrefix(stderr, "offqueue: ") && strings.Count(stderr, "\n") == 1
	found := false
	for _, w := range wants {
		found = found || strings.Contains(stderr, w)
	}
	if !ok || !found {
		t.Errorf("%s: exit %d, stderr %q; want 2 and one line with one of %q", what, code, stderr, wants)
	}
}

// TestTruncatedWhileInUse truncates a cycle file while a writer (this
// process) has the queue open and a command reads it: dump, reading,
// and follow, waiting at the end, end with one error line and status 2;
// stats and verify of the truncated file do not report success.
func TestTruncatedWhileInUse(t *testing.T) {
	t.Run("dump", func(t *testing.T) {
		_, cycle, _ := truncatedQueue(t, 40000)
		dir := filepath.Dir(cycle)
		cmd := exec.Command(bin, "dump", dir)
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The first byte comes when dump flushes its first 64 KiB: it is
		// in the middle of the file, and blocks once the pipe is full.
		if _, err := io.ReadFull(stdout, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(cycle, 8192); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		oneLine(t, "dump", stderr.String(), cmd.ProcessState.ExitCode(),
			"memory fault at 0x", "was a cycle file truncated while in use?")
	})
	t.Run("follow", func(t *testing.T) {
		_, cycle, _ := truncatedQueue(t, 10)
		dir := filepath.Dir(cycle)
		cmd := exec.Command(bin, "follow", "--from", "start", dir)
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		for i := 0; i < 11; i++ {
			if !sc.Scan() {
				t.Fatalf("follow printed %d lines, then %v; stderr %q", i, sc.Err(), stderr.String())
			}
		}
		// Above the last message, below what follow mapped (a block).
		if err := os.Truncate(cycle, 4*4096); err != nil {
			t.Fatal(err)
		}
		late := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		defer late.Stop()
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		oneLine(t, "follow", stderr.String(), cmd.ProcessState.ExitCode(), "truncated while in use")
	})
	t.Run("stats and verify", func(t *testing.T) {
		dir, cycle, _ := truncatedQueue(t, 5000)
		if err := os.Truncate(cycle, 16384); err != nil { // inside the messages
			t.Fatal(err)
		}
		_, errOut, code := offqueue(t, "", "stats", dir)
		oneLine(t, "stats", errOut, code, "could not be read ("+filepath.Base(cycle)+")")
		out, _, code := offqueue(t, "", "verify", dir)
		if code != 1 || !strings.Contains(out, "runs past the end of the file") {
			t.Errorf("verify: exit %d, stdout %q", code, out)
		}
	})
}
