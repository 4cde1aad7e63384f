package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/offmap"
)

// The tests run the built command, as an operator would. TestMain builds
// it once; the test binary itself also serves as the child processes the
// tests need (a writer to kill, a lock holder), chosen by an environment
// variable.

var offmapBin string

const childEnv = "OFFMAP_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		runChild(child, os.Args[len(os.Args)-1])
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "offmap-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Built without the race detector even under -race: it cannot see the
	// mapped memory that the command shares, and its start and exit would
	// slow the hundreds of runs tenfold.
	offmapBin = filepath.Join(dir, "offmap")
	if out, err := exec.Command("go", "build", "-o", offmapBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one run of the command did.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run executes offmap with args and stdin and returns what it did.
func offmapRun(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	cmd := exec.Command(offmapBin, args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("offmap %s: %v", strings.Join(args, " "), err)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Fatalf("offmap %s printed a stack trace:\n%s", strings.Join(args, " "), r)
	}
	return r
}

// ok runs offmap and fails the test unless it exits 0; it returns stdout.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := offmapRun(t, nil, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("offmap %s: want success, got %s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// fails runs offmap and checks that it exits with code and one error line
// on stderr that contains want.
func fails(t *testing.T, code int, want string, args ...string) result {
	t.Helper()
	r := offmapRun(t, nil, args...)
	oneErrorLine(t, r, code, want)
	return r
}

func oneErrorLine(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	if !strings.HasPrefix(r.stderr, "offmap: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Fatalf("want one error line starting with 'offmap: ', got %q", r.stderr)
	}
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("want an error containing %q, got %q", want, r.stderr)
	}
}

// newMap creates a map file with the command and returns its path.
func newMap(t *testing.T, entries, avgKey, avgValue int, extra ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.map")
	ok(t, append([]string{"create", path, "--entries", fmt.Sprint(entries),
		"--avg-key", fmt.Sprint(avgKey), "--avg-value", fmt.Sprint(avgValue)}, extra...)...)
	return path
}

// statsOf returns the Stats of the map at path, opened read-only.
func statsOf(t *testing.T, path string) offmap.Stats {
	t.Helper()
	m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return m.Stats()
}

// contents reads every entry of the map at path with the library, read-only.
func contents(t *testing.T, path string) map[string]string {
	t.Helper()
	m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := make(map[string]string)
	if err := m.Range(func(k, v []byte) bool {
		if _, dup := got[string(k)]; dup {
			t.Errorf("key %q seen twice", k)
		}
		got[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if m.Len() != len(got) {
		t.Errorf("Len %d, Range saw %d entries", m.Len(), len(got))
	}
	return got
}

// fill puts entries into the map at path with the library.
func fill(t *testing.T, path string, entries map[string]string) {
	t.Helper()
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range entries {
		if err := m.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func sameContents(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d entries, want %d", len(got), len(want))
	}
	bad := 0
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("key %q missing", k)
			bad++
		} else if g != v {
			t.Errorf("key %q: value %q, want %q", k, g, v)
			bad++
		}
		if bad > 10 {
			t.FailNow()
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected key %q", k)
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
}

// sampleEntries returns n entries with keys "key-0000"... and values of
// varied lengths.
func sampleEntries(n int) map[string]string {
	e := make(map[string]string, n)
	for i := range n {
		e[fmt.Sprintf("key-%04d", i)] = strings.Repeat(fmt.Sprintf("v%d.", i), 1+i%5)
	}
	return e
}
