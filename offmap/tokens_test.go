package offmap

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// The checked-in map (testdata/amd64) is of format version 2, whose lock
// words name processes by pid and start time. Version 3 changed only what
// those words mean, so a writer alone with such a file upgrades it in
// place; any other open is refused, since a process of the old version
// may be using the file and the two cannot judge each other's liveness.
func TestPidTokenFileUpgradedInPlace(t *testing.T) {
	p := tempPath(t)
	old := gunzipFile(t, "testdata/amd64/grown.offmap.gz")
	if v := binary.LittleEndian.Uint32(old[8:]); v != pidTokenVersion {
		t.Fatalf("testdata map has version %d, want %d", v, pidTokenVersion)
	}
	if err := os.WriteFile(p, old, 0o600); err != nil {
		t.Fatal(err)
	}
	version := func() uint32 {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint32(b[8:])
	}

	// Read-only, and while another open shares the file: refused, the
	// file unchanged.
	if _, err := Open(p, Options{ReadOnly: true}); !errors.Is(err, ErrVersion) {
		t.Fatalf("read-only open of a version 2 file: %v, want ErrVersion", err)
	}
	other, _, err := shm.OpenFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := shm.Flock(other, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, Options{}); !errors.Is(err, ErrVersion) {
		t.Fatalf("open of a version 2 file another process has open: %v, want ErrVersion", err)
	}
	if v := version(); v != pidTokenVersion {
		t.Fatalf("a refused open changed the version to %d", v)
	}
	other.Close()

	// Alone: upgraded in place, every entry kept.
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatalf("open alone: %v", err)
	}
	if v := version(); v != formatVersion || m.Stats().FormatVersion != formatVersion {
		t.Fatalf("after an open alone: version %d on disk, %d in Stats; want %d", v, m.Stats().FormatVersion, formatVersion)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open after the upgrade: %v", err)
	}
	ro.Close()
}

// TestUpgradeInPlaceLeavesOldTokensDead: Upgrade rewrites a version 2
// file's header alone, without touching its lock words; a token that an
// old process left there (pid and start time) names no witness byte, so
// the next writer takes that lock over at once, even while others have
// the file open.
func TestUpgradeInPlaceLeavesOldTokensDead(t *testing.T) {
	p := tempPath(t)
	img := gunzipFile(t, "testdata/amd64/grown.offmap.gz")
	h, err := decodeHeader(img[:headerSize], int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	// Every segment locked by an old process: pid 4242, start time 77
	// ticks, or one whose start time sets the token's high bits.
	for i := range h.Segments {
		tok := uint64(4242) | uint64(77+i)<<32
		if i%2 == 1 {
			tok |= 1 << 62
		}
		binary.LittleEndian.PutUint64(img[int(h.SegHeadersOff)+int(i)*segmentHeaderSize:], tok)
	}
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := Upgrade(p); n != 0 || err != nil {
		t.Fatalf("Upgrade of a version 2 file: %d, %v", n, err)
	}
	if _, err := Upgrade(p); !errors.Is(err, ErrCurrent) {
		t.Fatalf("Upgrade again: %v, want ErrCurrent", err)
	}
	other, _, err := shm.OpenFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := shm.Flock(other, false, false); err != nil { // another process has it open
		t.Fatal(err)
	}
	m, err := Open(p, Options{LockTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	for i, s := range m.Stats().PerSegment {
		if s.LockHolder != 4242 || !s.HolderDead {
			t.Fatalf("segment %d: holder %d, dead %v; want 4242, dead", i, s.LockHolder, s.HolderDead)
		}
	}
	start := time.Now()
	for i := range 2000 {
		mustPut(t, m, key(i), []byte("after"))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("taking %d old locks over took %v", h.Segments, d)
	}
}
