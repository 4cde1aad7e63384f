package main

import (
	"encoding/json"
	"os"
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
