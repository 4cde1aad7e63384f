package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatPrometheus: stat --prometheus prints each map's metrics in the
// text exposition format, families once each, the header's counters as
// counters; an unreadable map prints nothing and exits 2.
func TestStatPrometheus(t *testing.T) {
	a := newMap(t, 1000, 8, 16)
	fill(t, a, sampleEntries(300))
	f, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []byte{3, 5, 9} {
		if _, err := f.WriteAt([]byte{n}, 320+8*int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	b := newMap(t, 100, 8, 8)
	out := ok(t, "stat", "--prometheus", a, b)
	want := []string{
		"# TYPE offmap_map_entries gauge\n" +
			fmt.Sprintf("offmap_map_entries{path=%q} 300\n", a) +
			fmt.Sprintf("offmap_map_entries{path=%q} 0\n", b),
		fmt.Sprintf("offmap_map_file_bytes{path=%q} 131072\n", a),
		fmt.Sprintf("offmap_map_max_file_bytes{path=%q} 1073741824\n", a),
		fmt.Sprintf("offmap_map_growth_steps_total{path=%q} 0\n", a),
		"# TYPE offmap_map_lock_takeovers_total counter\n" +
			fmt.Sprintf("offmap_map_lock_takeovers_total{path=%q} 3\n", a),
		fmt.Sprintf("offmap_map_repairs_total{path=%q} 5\n", a),
		fmt.Sprintf("offmap_map_expired_entries_total{path=%q} 9\n", a),
		fmt.Sprintf("offmap_map_expired_entries_total{path=%q} 0\n", b),
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("lacks %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "# HELP "); n != 12 || strings.Count(out, "# TYPE ") != 12 || strings.Count(out, "\n") != 12*4 {
		t.Errorf("%d families, want 12 of two samples each:\n%s", n, out)
	}
	r := fails(t, 2, "", "stat", "--prometheus", a, filepath.Join(t.TempDir(), "missing.map"))
	if r.stdout != "" {
		t.Errorf("a missing map: stdout %q", r.stdout)
	}
	fails(t, 2, "--prometheus prints neither JSON nor segments", "stat", "--prometheus", "--json", a)
	fails(t, 2, "wrong number of arguments", "stat", a, b)
}
