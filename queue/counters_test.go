package queue

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"
)

// TestSkippedSlotsCounted: slots whose writers died are counted in
// queue.meta once each, by the tailer that marks them, whichever process
// that is; a tailer that finds them marked already and another process
// read the same count.
func TestSkippedSlotsCounted(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Fast, SkipAfter: 2 * time.Millisecond})
	q.Append([]byte("before"))
	const dead = 3
	for range dead {
		cmd := helperCmd(t, "reserve-and-hang", dir)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		cmd.Process.Kill()
		cmd.Wait()
		if !strings.HasPrefix(line, "reserved") {
			t.Fatalf("helper said %q", line)
		}
	}
	q.Append([]byte("after"))
	read := func() []string {
		tl := tailerT(t, q)
		var got []string
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for len(got) < 2 {
			if err := tl.Wait(ctx, Block); err != nil {
				t.Fatalf("after %q: %v", got, err)
			}
			_, m, err := tl.Next()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m))
		}
		return got
	}
	for pass := range 2 { // the second tailer finds them skipped already
		if got := read(); got[0] != "before" || got[1] != "after" {
			t.Fatalf("pass %d read %q", pass, got)
		}
		st, err := q.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.SkippedSlots != dead {
			t.Fatalf("pass %d: Stats counts %d skipped slots, want %d", pass, st.SkippedSlots, dead)
		}
	}
	out, err := helperCmd(t, "skipped-count", dir).Output()
	if err != nil || strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("another process reads %q (%v), want 3", out, err)
	}
}
