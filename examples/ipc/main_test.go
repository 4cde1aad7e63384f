package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReaderSeesWriter builds the example and runs it as a user would: the
// reader must print prices it read while the writer process was running,
// and the final trade count the writer made.
func TestReaderSeesWriter(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ipc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-updates", "150", "-map", filepath.Join(t.TempDir(), "p.map")).CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "writer finished: 150 trades seen by the reader") {
		t.Fatalf("final count missing:\n%s", s)
	}
	if n := strings.Count(s, "ACME"); n < 2 {
		t.Fatalf("reader printed prices %d times while the writer ran:\n%s", n, s)
	}
}
