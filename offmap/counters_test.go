package offmap

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func init() {
	// print-counters prints the header's event counters as Stats reads
	// them in a process of its own, read-only.
	children["print-counters"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer m.Close()
		st := m.Stats()
		fmt.Println(st.LockTakeovers, st.Repairs, st.ExpiredRemoved)
		return nil
	}
}

// killHolding starts a process that locks key's segment and kills it
// there, holding the lock.
func killHolding(t *testing.T, p string, key string) {
	t.Helper()
	cmd := child(t, "hold-lock", "MAP="+p, "KEY="+key)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Kill()
	cmd.Wait()
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("child said %q", line)
	}
}

// TestEventCountersAcrossProcesses: lock takeovers, repairs and expired
// entries removed are counted in the file's header, whichever process
// had the event, and read the same by a third process.
func TestEventCountersAcrossProcesses(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8, Expiring: true, LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	if st := m.Stats(); st.LockTakeovers != 0 || st.Repairs != 0 || st.ExpiredRemoved != 0 {
		t.Fatalf("new map counts %d takeovers, %d repairs, %d expired removed", st.LockTakeovers, st.Repairs, st.ExpiredRemoved)
	}
	// Two processes die holding a lock; this one takes both over.
	for _, k := range []string{"a", "b"} {
		killHolding(t, p, k)
		if err := m.Put([]byte(k), []byte("after")); err != nil {
			t.Fatalf("Put after the holder died: %v", err)
		}
	}
	// Five entries that have expired: a Put over one removes it, another
	// process's Sweep the other four.
	past := time.Now().Add(-time.Second)
	for i := range 5 {
		if err := m.PutExpiring(fmt.Appendf(nil, "x%d", i), []byte("v"), past); err != nil {
			t.Fatal(err)
		}
	}
	mustPut(t, m, []byte("x0"), []byte("again"))
	if out, err := child(t, "expiry-sweeper", "MAP="+p).Output(); err != nil || strings.TrimSpace(string(out)) != "4" {
		t.Fatalf("sweeper: %q, %v; want 4 swept", out, err)
	}
	st := m.Stats()
	if st.LockTakeovers != 2 || st.Repairs != 2 || st.ExpiredRemoved != 5 {
		t.Fatalf("Stats: %d takeovers, %d repairs, %d expired removed; want 2, 2, 5", st.LockTakeovers, st.Repairs, st.ExpiredRemoved)
	}
	out, err := child(t, "print-counters", "MAP="+p).Output()
	if err != nil || strings.TrimSpace(string(out)) != "2 2 5" {
		t.Fatalf("a third process reads %q (%v), want \"2 2 5\"", out, err)
	}
}

// TestEventCountersRecover: Recover, and the open of a map that no other
// process has open, count the dead holders they find; a segment without
// damage is not counted as repaired.
func TestEventCountersRecover(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	killHolding(t, p, "a")
	fixed, err := m.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.LockTakeovers != 1 || st.Repairs != 1 {
		t.Fatalf("after Recover (%q): %d takeovers, %d repairs; want 1, 1", fixed, st.LockTakeovers, st.Repairs)
	}
	// Alone with the file: the next open finds the dead holder.
	killHolding(t, p, "b")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	if st := m.Stats(); st.LockTakeovers != 2 || st.Repairs != 2 {
		t.Fatalf("after an open alone: %d takeovers, %d repairs; want 2, 2", st.LockTakeovers, st.Repairs)
	}
	// Counters are not reserved bytes: Recover keeps them.
	if _, err := m.Recover(); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.LockTakeovers != 2 || st.Repairs != 2 {
		t.Fatalf("after a second Recover: %d takeovers, %d repairs; want 2, 2", st.LockTakeovers, st.Repairs)
	}
}
