package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	if path := os.Getenv("REQUESTCOUNT_MAP"); path != "" {
		if err := run(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runOnce runs the program in a new process, as `go run` would.
func runOnce(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "REQUESTCOUNT_MAP="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	return string(out)
}

func TestEachRunCountsOneMore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "counts.map")
	for i := 1; i <= 3; i++ {
		want := fmt.Sprintf("user1 requests: %d\nuser2 requests: %d\nuser3 requests: %d\n", i, i, i)
		if got := runOnce(t, path); got != want {
			t.Fatalf("run %d printed %q, want %q", i, got, want)
		}
	}
}

// TestConcurrentRunsLoseNothing starts runs at the same time; the run after
// them must see every one of their increments.
func TestConcurrentRunsLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "counts.map")
	const runs = 12
	var wg sync.WaitGroup
	for range runs {
		wg.Add(1)
		go func() { defer wg.Done(); runOnce(t, path) }()
	}
	wg.Wait()
	got := runOnce(t, path)
	if !strings.HasPrefix(got, fmt.Sprintf("user1 requests: %d\n", runs+1)) {
		t.Fatalf("after %d concurrent runs the next printed %q", runs, got)
	}
}
