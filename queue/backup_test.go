package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type indexedMsg struct {
	idx    uint64
	writer int
	n      int
}

// readBackedUp reads every message of q, from the start.
func readBackedUp(t *testing.T, q *Queue) []indexedMsg {
	t.Helper()
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var out []indexedMsg
	for {
		idx, m, err := tl.Next()
		if errors.Is(err, ErrNoMessage) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		w, n, ok := parseWriterMsg(m)
		if !ok {
			t.Fatalf("bad message %x at %#x", m, idx)
		}
		out = append(out, indexedMsg{idx, w, n})
	}
}

// TestBackupUnderAppenders backs a queue up while three processes append
// across cycle rolls: each copy passes Check, holds every message before
// its End in order, the same as the source's, and none at or after End.
func TestBackupUnderAppenders(t *testing.T) {
	const writers = 3
	n := 200000
	if testing.Short() {
		n = 50000
	}
	dir := filepath.Join(t.TempDir(), "q")
	q, err := Open(dir, Options{Roll: Fast})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	audit, err := q.NamedTailer("audit")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append(writerMsg(make([]byte, 16), 99, 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := audit.Next(); err != nil {
		t.Fatal(err)
	}
	if err := audit.Ack(); err != nil {
		t.Fatal(err)
	}
	acked := audit.Index()

	// The appenders stop halfway until the first backup is taken, so that
	// at least one copy is made while they run however the OS schedules
	// them (Wine's sleeps are long enough for 50,000 appends).
	gate := filepath.Join(t.TempDir(), "gate")
	done := make(chan error, writers)
	for w := range writers {
		cmd := helperCmd(t, "append", dir, w, n, 2)
		cmd.Env = append(cmd.Env, "OFFQUEUE_GATE="+gate)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
	}
	var backups []string
	var infos []BackupInfo
	// A backup every thousand messages or so, while the appenders run.
	seen, last := 0, 0
	probe, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	finished := 0
	deadline := time.Now().Add(2 * time.Minute)
	for finished < writers {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished++
			continue
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the appenders take too long")
		}
		for range 1000 { // a bounded step: the appenders may be faster
			if _, _, err := probe.Next(); err != nil {
				break
			}
			seen++
		}
		if len(backups) >= 6 || seen < last+300 {
			time.Sleep(time.Millisecond)
			continue
		}
		last = seen
		dest := filepath.Join(t.TempDir(), fmt.Sprintf("backup-%d", len(backups)))
		info, err := q.Backup(dest)
		if err != nil {
			t.Fatal(err)
		}
		backups, infos = append(backups, dest), append(infos, info)
		if len(backups) == 1 {
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	source := readBackedUp(t, q)
	if len(source) != 1+writers*(n+1) {
		t.Fatalf("the source holds %d messages, want %d", len(source), 1+writers*(n+1))
	}
	mid := 0
	var sizes []int64
	for i, dest := range backups {
		info := infos[i]
		b, err := Open(dest, Options{Roll: Fast})
		if err != nil {
			t.Fatal(err)
		}
		if lost, err := b.Check(); err != nil || len(lost) != 0 {
			t.Fatalf("backup %d: Check: %v, lost %v", i, err, lost)
		}
		got := readBackedUp(t, b)
		var want []indexedMsg
		for _, m := range source {
			if m.idx < info.End {
				want = append(want, m)
			}
		}
		if len(got) != len(want) || int64(len(got)) != info.Messages {
			t.Fatalf("backup %d (end %#x): %d messages, the source has %d before its end, Backup says %d", i, info.End, len(got), len(want), info.Messages)
		}
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("backup %d: message %d is %+v, the source's is %+v", i, j, got[j], want[j])
			}
		}
		sizes = append(sizes, info.Messages)
		if len(got) > 1 && len(got) < len(source) {
			mid++
		}
		st, err := b.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Tailers) != 1 || st.Tailers[0].Name != "audit" || st.Tailers[0].Acked != acked || st.Tailers[0].Lag != int64(len(got)-1) {
			t.Fatalf("backup %d: tailers %+v, want audit at %#x with lag %d", i, st.Tailers, acked, len(got)-1)
		}
		c, err := b.Count(0, info.End)
		if err != nil || c != int64(len(got)) {
			t.Fatalf("backup %d: Count %d, %v; want %d", i, c, err, len(got))
		}
		// Appenders continue the copy after its end.
		idx, err := b.Append(writerMsg(make([]byte, 16), 100, 0))
		if err != nil || idx < info.End {
			t.Fatalf("backup %d: append after the end: %#x, %v (end %#x)", i, idx, err, info.End)
		}
		b.Close()
	}
	if mid == 0 {
		t.Fatalf("no backup was taken while the appenders ran: backups of %v messages of %d", sizes, len(source))
	}
}

func TestBackupQueueErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	exists := t.TempDir()
	if _, err := q.Backup(exists); !errors.Is(err, os.ErrExist) {
		t.Fatalf("backup over an existing directory: %v", err)
	}
	// An empty queue: a copy with no cycle.
	empty := filepath.Join(t.TempDir(), "empty")
	info, err := q.Backup(empty)
	if err != nil || info.Messages != 0 || len(info.Cycles) != 0 {
		t.Fatalf("backup of an empty queue: %+v, %v", info, err)
	}
	e, err := Open(empty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if lost, err := e.Check(); err != nil || lost != nil {
		t.Fatalf("empty copy: %v %v", lost, err)
	}
	e.Close()
	if _, err := q.Backup(filepath.Join(t.TempDir(), "no", "such")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup into a missing directory: %v", err)
	}
	q.Close()
	if _, err := q.Backup(filepath.Join(t.TempDir(), "closed")); !errors.Is(err, ErrClosed) {
		t.Fatalf("backup of a closed queue: %v", err)
	}
}

// TestBackupChecksummedQueue: a queue of checksummed messages is copied
// with its flags, and every message of the copy passes its checksum.
func TestBackupChecksummedQueue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := Open(dir, Options{ChecksumMessages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for i := range 500 {
		if _, err := q.Append(writerMsg(make([]byte, 16), 1, i)); err != nil {
			t.Fatal(err)
		}
	}
	dest := filepath.Join(t.TempDir(), "copy")
	info, err := q.Backup(dest)
	if err != nil || info.Messages != 500 {
		t.Fatalf("backup: %+v %v", info, err)
	}
	b, err := Open(dest, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.Stats()
	if err != nil || !st.ChecksumMessages {
		t.Fatalf("the copy's stats: %+v %v", st, err)
	}
	if lost, err := b.Check(); err != nil || lost != nil {
		t.Fatalf("Check: %v %v", lost, err)
	}
	got := readBackedUp(t, b)
	if len(got) != 500 || got[499].n != 499 {
		t.Fatalf("the copy holds %d messages", len(got))
	}
}
