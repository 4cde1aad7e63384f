package queue

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/offmap/offmap/internal/shm"
)

// TestPidTokenMetaUpgradedInPlace: the checked-in queue has a queue.meta
// of format version 1, whose lock and writer leases name processes by pid
// and start time. A writer alone with it upgrades it in place; any other
// open is refused, since a process of the old version may be using it.
func TestPidTokenMetaUpgradedInPlace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	if err := os.CopyFS(dir, os.DirFS("testdata/amd64-queue")); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, metaName)
	if err := os.Chmod(meta, 0o644); err != nil {
		t.Fatal(err)
	}
	version := func() uint32 {
		b, err := os.ReadFile(meta)
		if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint32(b[8:])
	}
	if v := version(); v != pidTokenVersion {
		t.Fatalf("testdata queue.meta has version %d, want %d", v, pidTokenVersion)
	}
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrVersion) {
		t.Fatalf("read-only open of a version 1 queue: %v, want ErrVersion", err)
	}
	other, _, err := shm.OpenFile(meta, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := shm.Flock(other, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrVersion) {
		t.Fatalf("open of a version 1 queue another process has open: %v, want ErrVersion", err)
	}
	if v := version(); v != pidTokenVersion {
		t.Fatalf("a refused open changed the version to %d", v)
	}
	other.Close()
	q := openT(t, dir, Options{})
	if v := version(); v != formatVersion {
		t.Fatalf("after an open alone: version %d, want %d", v, formatVersion)
	}
	if st, err := q.Stats(); err != nil || st.FormatVersion != formatVersion {
		t.Fatalf("Stats: version %d, %v", st.FormatVersion, err)
	}
	if _, err := q.Append([]byte("after the upgrade")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Check(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open after the upgrade: %v", err)
	}
	ro.Close()
}
