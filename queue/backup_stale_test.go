package queue

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// staleQueue makes a queue (of the helpers' roll) with some messages.
func staleQueue(t *testing.T) (*Queue, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q")
	q, err := Open(dir, Options{Roll: Fast, SkipAfter: 5e6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	for i := range 100 {
		if _, err := q.Append(msgOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	return q, dir
}

// backupHelper starts a process that backs the queue up to dest and stops
// at its hook call after the given number of cycle files, holding the
// backup lock; it returns the process, its temporary directory and the
// pipe whose closing lets it go on.
func backupHelper(t *testing.T, dir, dest string, cycles int) (*helperProc, string) {
	t.Helper()
	cmd := helperCmd(t, "backup-and-hang", dir, cycles)
	cmd.Env = append(cmd.Env, "OFFQUEUE_DEST="+dest)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &helperProc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(out)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !p.out.Scan() {
		t.Fatal("the backup process ended before its hook")
	}
	tmp, ok := strings.CutPrefix(p.out.Text(), "tmp ")
	if !ok {
		t.Fatalf("backup process: %q", p.out.Text())
	}
	if fi, err := os.Stat(tmp); err != nil || !fi.IsDir() {
		t.Fatalf("its temporary directory: %v", err)
	}
	return p, tmp
}

type helperProc struct {
	cmd   *exec.Cmd
	stdin io.Closer
	out   *bufio.Scanner
}

// checkBackup opens a backup and checks it holds n messages, sound.
func checkBackup(t *testing.T, dest string, n int) {
	t.Helper()
	b, err := Open(dest, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if lost, err := b.Check(); err != nil || len(lost) != 0 {
		t.Fatalf("Check of the backup: %v %v", lost, err)
	}
	if k, err := b.Count(0, maxIndex); err != nil || k != int64(n) {
		t.Fatalf("the backup holds %d messages (%v), want %d", k, err, n)
	}
}

// TestBackupRemovesKilledLeftovers: a backup killed (kill -9) after
// copying a cycle file leaves its temporary directory; the next backup
// into the same directory removes it, and makes its own copy.
func TestBackupRemovesKilledLeftovers(t *testing.T) {
	q, dir := staleQueue(t)
	parent := t.TempDir()
	p, tmp := backupHelper(t, dir, filepath.Join(parent, "b1"), 1)
	if files, err := os.ReadDir(tmp); err != nil || len(files) == 0 {
		t.Fatalf("the killed backup's directory holds %v %v", files, err)
	}
	// SIGKILL (TerminateProcess on Windows), while it holds the lock.
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the killed backup left nothing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(parent, "b1")); !os.IsNotExist(err) {
		t.Fatalf("the killed backup's destination: %v", err)
	}
	dest := filepath.Join(parent, "b2")
	if _, err := q.Backup(dest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the killed backup's directory is still there: %v", err)
	}
	checkBackup(t, dest, 100)
}

// TestBackupKeepsLiveOnes: a backup running in another process, stopped
// with its temporary directory made, keeps it while another backup into
// the same directory runs, and completes when let go.
func TestBackupKeepsLiveOnes(t *testing.T) {
	q, dir := staleQueue(t)
	parent := t.TempDir()
	d1 := filepath.Join(parent, "b1")
	p, tmp := backupHelper(t, dir, d1, 0)
	d2 := filepath.Join(parent, "b2")
	if _, err := q.Backup(d2); err != nil {
		t.Fatal(err)
	}
	checkBackup(t, d2, 100)
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("a live backup's directory was removed: %v", err)
	}
	p.stdin.Close()
	if !p.out.Scan() || p.out.Text() != "done" {
		t.Fatalf("the backup let go: %q", p.out.Text())
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	checkBackup(t, d1, 100)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the completed backup's directory: %v", err)
	}
}

// TestBackupLeavesLookalikes: only directories that Backup makes, holding
// only a queue's files, are removed as leftovers; a real leftover beside
// them is.
func TestBackupLeavesLookalikes(t *testing.T) {
	q, _ := staleQueue(t)
	parent := t.TempDir()
	cycle := filepath.Base(q.cyclePath(mustCycles(t, q)[0]))
	mk := func(name string, files ...string) string {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	stale := mk(".old.backup-4242", metaName, cycle)
	staleN := mk(".old.backup-4242-2", metaName)
	keep := []string{
		mk(".foo.backup-x", metaName),
		mk(".foo.backup-123.old", metaName),
		mk(".foo.backup-0123", metaName),
		mk(".foo.backup-12-1", metaName),
		mk("..backup-12", metaName),
		mk("foo.backup-12", metaName),
		mk(".photos.backup-2024", "holiday.jpg"),
		mk(".mixed.backup-77", metaName, "notes.txt"),
	}
	sub := mk(".sub.backup-78", metaName)
	if err := os.Mkdir(filepath.Join(sub, "inner"), 0o700); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, sub)
	file := filepath.Join(parent, ".file.backup-1")
	if err := os.WriteFile(file, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, file)
	if runtime.GOOS != "windows" {
		// (Under Wine, a symbolic link made here shows as a plain
		// directory; on Windows this case waits for a run there.)
		target := mk("target", metaName)
		link := filepath.Join(parent, ".link.backup-5")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, link, target, filepath.Join(target, metaName))
	}

	dest := filepath.Join(parent, "b")
	if _, err := q.Backup(dest); err != nil {
		t.Fatal(err)
	}
	checkBackup(t, dest, 100)
	for _, d := range []string{stale, staleN} {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("leftover %s not removed: %v", filepath.Base(d), err)
		}
	}
	for _, k := range keep {
		if _, err := os.Lstat(k); err != nil {
			t.Errorf("%s was removed: %v", k, err)
		}
	}
}

func mustCycles(t *testing.T, q *Queue) []uint32 {
	t.Helper()
	cs, err := q.Cycles()
	if err != nil || len(cs) == 0 {
		t.Fatalf("cycles %v %v", cs, err)
	}
	return cs
}
