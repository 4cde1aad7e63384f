package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestToolsOnTruncatedFile: a grown map cut short in its growth area
// while another process has it open. No tool may exit 0 on it or die of
// a signal: verify reports the cut tables and extents, stat and sweep
// refuse the file, recover drops what was cut, says so and exits 1; after
// it the map verifies clean and the entries of the segments it kept are
// there.
func TestToolsOnTruncatedFile(t *testing.T) {
	path := newMap(t, 100, 8, 16, "--ttl", "1h")
	entries := sampleEntries(3000)
	fill(t, path, entries)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	start := int64(readRaw(t, path).headerFileSize)
	page := int64(os.Getpagesize())
	cut := (start + (st.Size()-start)/2) / page * page
	if cut <= start {
		t.Fatalf("the map did not grow: %d bytes, %d at the start", st.Size(), start)
	}
	c := startChild(t, "opener", path)
	c.expect(t, "ready")
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"verify", "stat", "sweep", "recover"} {
		r := offmapRun(t, nil, tool, path)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "past the end of the file") {
			t.Errorf("offmap %s on a file cut to %d bytes: want a non-zero exit naming the cut, got %s", tool, cut, r)
		}
		if tool == "recover" && !strings.Contains(r.stdout, "fixed: ") {
			t.Errorf("recover did not say what it dropped: %s", r)
		}
	}
	c.release(t)
	ok(t, "recover", path)
	if out := ok(t, "verify", path); !strings.Contains(out, ": ok:") {
		t.Fatalf("verify after recover: %q", out)
	}
	kept := contents(t, path)
	for k, v := range kept {
		if entries[k] != v {
			t.Fatalf("after recover %q = %q, want %q", k, v, entries[k])
		}
	}
	if len(kept) == 0 || len(kept) == len(entries) {
		t.Fatalf("%d of %d entries kept", len(kept), len(entries))
	}
	t.Log(fmt.Sprintf("%d of %d entries kept", len(kept), len(entries)))
}
