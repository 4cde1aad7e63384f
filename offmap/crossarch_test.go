package offmap

import (
	"bytes"
	"compress/gzip"
	"os"
	"runtime"
	"testing"
)

// TestCrossArchMap opens maps that grew on another system and are
// checked in: testdata/amd64/grown.offmap.gz, made on linux/amd64 (4 slot
// tables, 5 extents), and testdata/windows-amd64/grown.offmap.gz, made on
// windows/amd64 by TestWriteCrossArchMap (its file padded to 64 KiB
// boundaries, as a Windows writer maps). Each is a map of 100 declared
// entries given keys 0 to 1,999 (values from bigValue), every third
// deleted, and a handle "hits" at 424242. CI runs this on linux/arm64
// under qemu and on windows/amd64 under Wine too: the format is
// little-endian and the same everywhere.
func TestCrossArchMap(t *testing.T) {
	for _, made := range []string{"amd64", "windows-amd64"} {
		t.Run(made, func(t *testing.T) { testCrossArchMap(t, made) })
	}
}

// crossArchMapOptions are those the checked-in maps were made with.
var crossArchMapOptions = Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 16, MaxValueSize: 256}

// TestWriteCrossArchMap writes testdata/windows-amd64/grown.offmap.gz
// again, on windows/amd64: OFFMAP_WRITE_TESTDATA=1 go test -run
// TestWriteCrossArchMap, under Wine or on Windows.
func TestWriteCrossArchMap(t *testing.T) {
	if os.Getenv("OFFMAP_WRITE_TESTDATA") == "" {
		t.Skip("writes testdata: set OFFMAP_WRITE_TESTDATA=1")
	}
	if runtime.GOOS != "windows" || runtime.GOARCH != "amd64" {
		t.Fatal("this checked-in map is written on windows/amd64")
	}
	p := tempPath(t)
	m, err := Open(p, crossArchMapOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		mustPut(t, m, key(i), bigValue(i, growValueSize(i, 16)))
	}
	for i := 0; i < 2000; i += 3 {
		if _, err := m.Delete(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := m.AcquireInt64([]byte("hits"))
	if err != nil {
		t.Fatal(err)
	}
	h.Store(424242)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(img)
	zw.Close()
	if err := os.MkdirAll("testdata/windows-amd64", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/windows-amd64/grown.offmap.gz", gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func testCrossArchMap(t *testing.T, made string) {
	p := tempPath(t)
	if err := os.WriteFile(p, gunzipFile(t, "testdata/"+made+"/grown.offmap.gz"), 0o600); err != nil {
		t.Fatal(err)
	}

	m, err := Open(p, Options{})
	if err != nil {
		t.Fatalf("open on %s/%s: %v", runtime.GOOS, runtime.GOARCH, err)
	}
	defer closeChecked(t, m)
	st := m.Stats()
	if made == "amd64" && (st.TablesGrown != 4 || st.ExtentsAdded != 5) || st.TablesGrown == 0 || st.ExtentsAdded == 0 || st.Capacity != 100 {
		t.Fatalf("stats: %+v", st)
	}
	checkCrossArchEntries(t, m)
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

// TestCrossArchMapReadOnly opens the checked-in maps read-only, as
// `offmap verify` and `offmap dump` of a file copied off another machine
// do. The one made on Linux ends between 64 KiB boundaries, which on
// Windows a reader maps only as the last view (shm.Region.ExtendTail):
// its last extent and slot table lie there.
func TestCrossArchMapReadOnly(t *testing.T) {
	for _, made := range []string{"amd64", "windows-amd64"} {
		t.Run(made, func(t *testing.T) {
			p := tempPath(t)
			if err := os.WriteFile(p, gunzipFile(t, "testdata/"+made+"/grown.offmap.gz"), 0o600); err != nil {
				t.Fatal(err)
			}
			if made == "amd64" {
				// Format version 2: the header alone is rewritten, the
				// file's length stays.
				if _, err := Upgrade(p); err != nil {
					t.Fatal(err)
				}
			}
			m, err := Open(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkCrossArchEntries(t, m)
		})
	}
}

// checkCrossArchEntries checks a checked-in map: Check passes, keys 0 to
// 1,999 but every third hold their values.
func checkCrossArchEntries(t *testing.T, m *Map) {
	t.Helper()
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
}
