package offmap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/isolate"
)

// The liveness tests run the processes that share a map in the views of
// the system that containers and hardened hosts give them (internal/isolate):
// a live lock holder must never be taken for dead, whatever its pid
// namespace, uid or /proc, and a dead one must still be taken over.

func init() {
	if err := isolate.Enter(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	// liveness-worker opens MAP, says "ready", waits for a line on stdin,
	// then: N increments of "counter" through Update, its fn sleeping
	// SLEEP (so that it holds the segment lock that long); INSERTS new
	// keys through Update, each fn sleeping SLEEP too; PUTS new keys
	// through Put. Keys carry ID.
	children["liveness-worker"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{LockTimeout: time.Minute})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		inserts, _ := strconv.Atoi(os.Getenv("INSERTS"))
		puts, _ := strconv.Atoi(os.Getenv("PUTS"))
		sleep, _ := time.ParseDuration(os.Getenv("SLEEP"))
		id := os.Getenv("ID")
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n')
		for range n {
			err := m.Update([]byte("counter"), func(v []byte, found bool) ([]byte, Op) {
				time.Sleep(sleep)
				return incrDecimal(v, found)
			})
			if err != nil {
				return err
			}
		}
		for i := range inserts {
			err := m.Update(fmt.Appendf(nil, "ins-%s-%d", id, i), func([]byte, bool) ([]byte, Op) {
				time.Sleep(sleep)
				return []byte(id), OpPut
			})
			if err != nil {
				return err
			}
		}
		for i := range puts {
			if err := m.Put(fmt.Appendf(nil, "put-%s-%d", id, i), []byte(id)); err != nil {
				return err
			}
		}
		return nil
	}
	// hold-odd opens MAP, takes the lock of KEY's segment and begins a
	// change there (the segment's version odd), says "changing" and
	// waits to be killed.
	children["hold-odd"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		s := m.segmentOf([]byte(os.Getenv("KEY")))
		if err := m.lock(s); err != nil {
			return err
		}
		beginChange(s)
		fmt.Println("changing")
		time.Sleep(time.Hour)
		return nil
	}
	// read-key opens MAP read-only, says "reading", reads KEY and says
	// "got VALUE".
	children["read-key"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer m.Close()
		fmt.Println("reading")
		v, err := m.Get([]byte(os.Getenv("KEY")))
		if err != nil {
			return err
		}
		fmt.Printf("got %s\n", v)
		return nil
	}
	// hold-open opens MAP for writing and keeps it open until stdin
	// closes.
	children["hold-open"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		return nil
	}
}

// livenessMap creates a one-segment map that every uid may open for
// writing, so that every operation of every process meets the same lock.
func livenessMap(t *testing.T) string {
	isolate.Require(t)
	p := isolate.SharedDir(t) + "/live.map"
	m, err := Open(p, Options{Entries: 500, AverageKeySize: 12, AverageValueSize: 8, Segments: 1, FileMode: 0o666})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// isolatedChild starts a child of role in view v and returns it with its
// stdin and stdout, once it has said its first line, want.
func isolatedChild(t *testing.T, v isolate.View, role, want string, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := child(t, role, env...)
	stdin, out := isolate.Start(t, cmd, v, want)
	return cmd, stdin, out
}

type livenessWork struct {
	view             isolate.View
	n, inserts, puts int
	sleep            time.Duration
}

// runLivenessPair runs two workers at once, each in its view, and checks
// the exact outcome: every increment counted, every key there, Check clean.
// A waiter that took the lock of a live holder makes increments vanish
// and inserts overwrite one another.
func runLivenessPair(t *testing.T, works ...livenessWork) {
	p := livenessMap(t)
	type started struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
	}
	var procs []started
	wantCount, wantKeys := 0, map[string]string{}
	for i, w := range works {
		id := strconv.Itoa(i)
		cmd, stdin, _ := isolatedChild(t, w.view, "liveness-worker", "ready", "MAP="+p, "ID="+id,
			"N="+strconv.Itoa(w.n), "INSERTS="+strconv.Itoa(w.inserts), "PUTS="+strconv.Itoa(w.puts), "SLEEP="+w.sleep.String())
		procs = append(procs, started{cmd, stdin})
		wantCount += w.n
		for j := range w.inserts {
			wantKeys[fmt.Sprintf("ins-%s-%d", id, j)] = id
		}
		for j := range w.puts {
			wantKeys[fmt.Sprintf("put-%s-%d", id, j)] = id
		}
	}
	start := time.Now()
	for _, pr := range procs {
		io.WriteString(pr.stdin, "go\n")
	}
	for i, pr := range procs {
		if err := pr.cmd.Wait(); err != nil {
			t.Fatalf("worker %d (%v): %v", i, works[i].view, err)
		}
	}
	t.Logf("workers done after %v", time.Since(start).Round(time.Millisecond))
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	if got := decimal(t, m, []byte("counter")); got != wantCount {
		t.Errorf("counter = %d, want %d: a live holder's lock was taken", got, wantCount)
	}
	missing := 0
	for k, v := range wantKeys {
		got, err := m.Get([]byte(k))
		if err != nil || string(got) != v {
			missing++
		}
	}
	if missing != 0 {
		t.Errorf("%d of %d keys lost or wrong", missing, len(wantKeys))
	}
	if wantCount > 0 {
		wantKeys["counter"] = strconv.Itoa(wantCount)
	}
	if m.Len() != len(wantKeys) {
		t.Errorf("Len = %d, want %d", m.Len(), len(wantKeys))
	}
	if err := m.Check(); err != nil {
		t.Error(err)
	}
}

// TestLivenessAcrossViews: two processes increment one counter through
// Update, each holding the lock for 30 ms at a time, so that each waits
// for the other far longer than a waiter's first check of the holder
// (20 ms). In every pairing of views each waiter must wait: the counter
// ends exact.
func TestLivenessAcrossViews(t *testing.T) {
	host := isolate.View{}
	pidns := isolate.View{PIDNamespace: true, Proc: "own"}
	for _, c := range []struct {
		name string
		a, b isolate.View
	}{
		{"pid namespace and host", pidns, host},
		{"pid namespace with the host's /proc and host", isolate.View{PIDNamespace: true}, host},
		{"two pid namespaces", pidns, pidns},
		{"empty /proc and host", isolate.View{Proc: "empty"}, host},
		{"hidepid, two uids", isolate.View{Proc: "hidepid", UID: 1000}, isolate.View{Proc: "hidepid", UID: 1001}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			runLivenessPair(t,
				livenessWork{view: c.a, n: 10, sleep: 30 * time.Millisecond},
				livenessWork{view: c.b, n: 10, sleep: 30 * time.Millisecond})
		})
	}
}

// TestLivenessInsertsUnderHidepid: one uid inserts keys through Update,
// holding the lock while its fn sleeps, while another uid puts many keys,
// both under a /proc that hides each from the other: no key is lost and
// the segment stays whole (a waiter that took the lock would write the
// same segment at the same time as its holder).
func TestLivenessInsertsUnderHidepid(t *testing.T) {
	inserts, puts := 60, 2000
	if testing.Short() {
		inserts, puts = 30, 1000
	}
	runLivenessPair(t,
		livenessWork{view: isolate.View{Proc: "hidepid", UID: 1000}, inserts: inserts, sleep: 10 * time.Millisecond},
		livenessWork{view: isolate.View{Proc: "hidepid", UID: 1001}, puts: puts})
}

// TestLivenessDeadHolderWithRecycledPID: a holder in a pid namespace of
// its own (pid 1 there) is reported live while it runs, from the host;
// once it is killed and another process, pid 1 in a namespace of its own
// too, has the map open, the holder is dead all the same, and the next
// writer takes its lock over at once, far below the lock timeout.
func TestLivenessDeadHolderWithRecycledPID(t *testing.T) {
	p := livenessMap(t)
	m, err := Open(p, Options{LockTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	k := []byte("k")
	mustPut(t, m, k, []byte("before"))
	seg := m.hash(k).seg
	pidns := isolate.View{PIDNamespace: true, Proc: "own"}
	holder, _, _ := isolatedChild(t, pidns, "hold-lock", "locked", "MAP="+p, "KEY=k")
	st := m.Stats().PerSegment[seg]
	if st.LockHolder != 1 || st.HolderDead {
		t.Fatalf("live holder in its own pid namespace: pid %d, dead %v; want pid 1, alive", st.LockHolder, st.HolderDead)
	}
	holder.Process.Kill()
	holder.Wait()
	isolatedChild(t, pidns, "hold-open", "ready", "MAP="+p)
	if st := m.Stats().PerSegment[seg]; st.LockHolder != 1 || !st.HolderDead {
		t.Fatalf("killed holder while another pid 1 has the map open: pid %d, dead %v; want pid 1, dead", st.LockHolder, st.HolderDead)
	}
	start := time.Now()
	if err := m.Put(k, []byte("after")); err != nil {
		t.Fatalf("Put after the holder died: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took the lock over after %v", d)
	}
	mustGet(t, m, k, "after")
}

// TestLivenessReadOnlyOtherUID: a read-only process of another uid, under
// hidepid, must wait for a live writer that holds a segment in the middle
// of a change, not read the segment as the writer left it; once the
// writer is killed, it reads.
func TestLivenessReadOnlyOtherUID(t *testing.T) {
	p := livenessMap(t)
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("before"))
	m.Close()
	holder, _, _ := isolatedChild(t, isolate.View{Proc: "hidepid", UID: 1000}, "hold-odd", "changing", "MAP="+p, "KEY=k")
	_, _, out := isolatedChild(t, isolate.View{Proc: "hidepid", UID: 1001}, "read-key", "reading", "MAP="+p, "KEY=k")
	lines := make(chan string, 1)
	go func() {
		line, _ := out.ReadString('\n')
		lines <- line
	}()
	// A reader that took the live writer for dead would read after
	// staleAfter (100 ms); this one must still be waiting six times later.
	select {
	case line := <-lines:
		t.Fatalf("the read-only reader read while the writer was live: %q", line)
	case <-time.After(6 * staleAfter):
	}
	holder.Process.Kill()
	holder.Wait()
	select {
	case line := <-lines:
		if line != "got before\n" {
			t.Fatalf("after the writer died, the reader said %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read-only reader did not read after the writer died")
	}
}
