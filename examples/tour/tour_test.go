package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTour runs the tour and checks that the README shows its code.
func TestTour(t *testing.T) {
	if err := tour(filepath.Join(t.TempDir(), "clients.map")); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	body := s[strings.Index(s, "\t// tour:begin\n")+len("\t// tour:begin\n") : strings.Index(s, "\t// tour:end\n")]
	var want strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	r := string(readme)
	at := strings.Index(r, "## A short tour")
	start := strings.Index(r[at:], "```go\n") + at + len("```go\n")
	end := strings.Index(r[start:], "```\n") + start
	if got := r[start:end]; got != want.String() {
		t.Fatalf("the README's tour differs from examples/tour/main.go:\n%s\nwant:\n%s", got, want.String())
	}
}
