package offmap

import (
	"os"
	"runtime"
	"testing"
)

// TestCrossArchMap opens a map that grew (4 slot tables, 5 extents) on
// linux/amd64, checked in as testdata/amd64/grown.offmap.gz: a map of 100
// declared entries given keys 0 to 1,999 (values from bigValue), every
// third deleted, and a handle "hits" at 424242. CI runs it on linux/arm64
// under qemu too: the format is little-endian and the same everywhere.
func TestCrossArchMap(t *testing.T) {
	p := tempPath(t)
	if err := os.WriteFile(p, gunzipFile(t, "testdata/amd64/grown.offmap.gz"), 0o600); err != nil {
		t.Fatal(err)
	}

	m, err := Open(p, Options{})
	if err != nil {
		t.Fatalf("open on %s/%s: %v", runtime.GOOS, runtime.GOARCH, err)
	}
	defer closeChecked(t, m)
	if st := m.Stats(); st.TablesGrown != 4 || st.ExtentsAdded != 5 || st.Capacity != 100 {
		t.Fatalf("stats: %+v", st)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if i%3 == 0 {
			mustMiss(t, m, key(i))
		} else {
			mustGet(t, m, key(i), string(bigValue(i, growValueSize(i, 16))))
		}
	}
	h, err := m.AcquireInt64([]byte("hits"))
	if err != nil || h.Load() != 424242 {
		t.Fatalf("hits: %v, %v", h.Load(), err)
	}
	for i := 2000; i < 4000; i++ {
		mustPut(t, m, key(i), bigValue(i, growValueSize(i, 16)))
	}
	if m.Stats().TablesGrown <= 4 {
		t.Fatal("the map did not grow further")
	}
}
