package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
)

// TestTour runs the tour and checks that docs/MAP.md shows its code.
func TestTour(t *testing.T) {
	if err := tour(filepath.Join(t.TempDir(), "clients.map")); err != nil {
		t.Fatal(err)
	}
	checkShown(t, "main.go", "tour", "../../docs/MAP.md", "## A tour")
}

// TestShortTour runs the README's short tour and checks that the README
// shows its code: the counter and the acknowledged message persist.
func TestShortTour(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := shortTour(ctx, dir); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shortTour: %v, want the context's deadline", err)
	}
	m, err := offmap.Open(filepath.Join(dir, "clients.map"), offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hits, err := m.AcquireInt64([]byte("user1"))
	if err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("hits = %d, want 1", n)
	}
	q, err := queue.Open(filepath.Join(dir, "orders"), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	tl, err := q.NamedTailer("billing")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	if tl.HasNext() {
		t.Error("the billing tailer has a message after the tour acknowledged its only one")
	}
	checkShown(t, "short.go", "short", "../../README.md", "## A short tour")
}

// checkShown fails t unless the first Go block after heading in the
// Markdown file doc is the code between the markers "// NAME:begin" and
// "// NAME:end" of the Go file src, one tab less indented.
func checkShown(t *testing.T, src, name, doc, heading string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	begin, end := "\t// "+name+":begin\n", "\t// "+name+":end\n"
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q", src, begin, end)
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(s[i+len(begin):j], "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	md, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	r := string(md)
	at := strings.Index(r, "\n"+heading+"\n")
	if at < 0 {
		t.Fatalf("%s: no heading %q", doc, heading)
	}
	start := strings.Index(r[at:], "```go\n")
	if start < 0 {
		t.Fatalf("%s: no Go block after %q", doc, heading)
	}
	start += at + len("```go\n")
	stop := strings.Index(r[start:], "```\n") + start
	if got := r[start:stop]; got != want.String() {
		t.Fatalf("the code under %q in %s differs from %s:\n%s\nwant:\n%s", heading, doc, src, got, want.String())
	}
}
