package offmap

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/offmap/offmap/internal/reexec"
)

// Tests that need several processes re-run this test binary with
// OFFMAP_CHILD naming the role; TestMain dispatches to it.
var children = map[string]func() error{}

func init() {
	// Under qemu-user every reserved page costs the emulator memory: 64 GiB
	// reservations, dozens of maps, would not fit (.ci/run sets this).
	if v, err := strconv.ParseInt(os.Getenv("OFFMAP_TEST_MAX_FILE_SIZE"), 10, 64); err == nil && v > 0 {
		defaultMaxFile = v
	}
}

func TestMain(m *testing.M) {
	if role := os.Getenv("OFFMAP_CHILD"); role != "" {
		f := children[role]
		if f == nil {
			fmt.Fprintln(os.Stderr, "unknown child role", role)
			os.Exit(2)
		}
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, "child", role+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	cleanupBench()
	os.Exit(code)
}

// child returns a command that runs role in a new process of this binary.
func child(t testing.TB, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := reexec.CommandContext(t.Context(), "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"OFFMAP_CHILD=" + role}, env...)...)
	return cmd
}

var small = Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8}

func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), "test.map") }

// openTest opens a new map file and closes it, after checking it, when the
// test ends.
func openTest(t testing.TB, opts Options) *Map {
	t.Helper()
	m, err := Open(tempPath(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, m) })
	return m
}

func closeChecked(t testing.TB, m *Map) {
	t.Helper()
	if !m.closed.Load() {
		if err := m.Check(); err != nil {
			t.Errorf("check after test: %v", err)
		}
	}
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func key(i int) []byte { return fmt.Appendf(nil, "key-%07d", i) }
func val(i int) []byte { return fmt.Appendf(nil, "value-%d", i) }

func mustPut(t testing.TB, m *Map, k, v []byte) {
	t.Helper()
	if err := m.Put(k, v); err != nil {
		t.Fatalf("Put(%q): %v", k, err)
	}
}

func mustGet(t testing.TB, m *Map, k []byte, want string) {
	t.Helper()
	got, err := m.Get(k)
	if err != nil {
		t.Fatalf("Get(%q): %v", k, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", k, got, want)
	}
}

func mustMiss(t testing.TB, m *Map, k []byte) {
	t.Helper()
	if v, err := m.Get(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", k, v, err)
	}
}

// gunzipFile returns the contents of the gzip file at path.
func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
