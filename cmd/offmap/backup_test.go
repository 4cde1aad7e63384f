package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupCommand: offmap backup writes a copy that verify passes and
// that holds every entry, and refuses an existing destination or a file
// it may not write.
func TestBackupCommand(t *testing.T) {
	src := newMap(t, 1000, 8, 16)
	entries := sampleEntries(3000) // past its 1000: it grew
	fill(t, src, entries)
	dst := filepath.Join(t.TempDir(), "copy.map")
	out := ok(t, "backup", src, dst)
	if !strings.Contains(out, "backed up 3000 entries") {
		t.Fatalf("backup printed %q", out)
	}
	ok(t, "verify", dst)
	sameContents(t, contents(t, dst), entries)
	if st := statsOf(t, dst); st.UnusedBytes != 0 || st.TablesGrown != 0 || st.Capacity < 3000 {
		t.Fatalf("the copy has unused space: %+v", statsOf(t, dst))
	}
	fails(t, exitError, "already exists", "backup", src, dst)

	j := filepath.Join(t.TempDir(), "j.map")
	var b backupJSON
	if err := json.Unmarshal([]byte(ok(t, "backup", "--json", src, j)), &b); err != nil || b.Entries != 3000 || b.Dest != j || b.FileSize <= 0 {
		t.Fatalf("backup --json: %+v %v", b, err)
	}
	fails(t, exitError, "no such file", "backup", filepath.Join(t.TempDir(), "none.map"), filepath.Join(t.TempDir(), "x.map"))
	if os.Getuid() != 0 {
		os.Chmod(src, 0o400)
		fails(t, exitError, "permission denied", "backup", src, filepath.Join(t.TempDir(), "ro.map"))
	}
}

// TestBackupToStdout: offmap backup FILE - writes the bytes of a map file
// to standard output, which written to a file verifies and holds every
// entry, with the summary on standard error; --json's object goes there
// too.
func TestBackupToStdout(t *testing.T) {
	src := newMap(t, 1000, 8, 16)
	entries := sampleEntries(2500)
	fill(t, src, entries)
	r := offmapRun(t, nil, "backup", src, "-")
	if r.code != 0 || !strings.Contains(r.stderr, "backed up 2500 entries of "+src) || !strings.Contains(r.stderr, "to standard output") {
		t.Fatalf("backup to stdout: exit %d, stderr %q", r.code, r.stderr)
	}
	dst := filepath.Join(t.TempDir(), "restored.map")
	if err := os.WriteFile(dst, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, "verify", dst)
	sameContents(t, contents(t, dst), entries)

	r = offmapRun(t, nil, "backup", "--json", src, "-")
	var b backupJSON
	if err := json.Unmarshal([]byte(r.stderr), &b); err != nil || r.code != 0 || b.Entries != 2500 || b.Dest != "-" || b.FileSize != int64(len(r.stdout)) {
		t.Fatalf("backup --json to stdout: exit %d, %+v %v (stdout %d bytes)", r.code, b, err, len(r.stdout))
	}
	// Nothing is left beside the map: the copy was built in an unnamed file.
	names, err := os.ReadDir(filepath.Dir(src))
	if err != nil || len(names) != 1 {
		t.Fatalf("the map's directory holds %v %v", names, err)
	}
}

// TestBackupToTerminal: a map file's bytes are not written to a terminal:
// backup FILE - with stdout on one fails with a line that says what to do,
// and writes nothing there.
func TestBackupToTerminal(t *testing.T) {
	src := newMap(t, 100, 8, 16)
	fill(t, src, sampleEntries(10))
	master, tty := openPTY(t)
	screen := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO once no process has the tty open
		screen <- b
	}()
	cmd := exec.Command(offmapBin, "backup", src, "-")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = tty, &stderr
	err := cmd.Run()
	tty.Close()
	shown := <-screen
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitError || !strings.Contains(stderr.String(), "standard output is a terminal") || len(shown) != 0 {
		t.Fatalf("backup to a terminal: %v, stderr %q, the terminal showed %d bytes", err, stderr.String(), len(shown))
	}
}
