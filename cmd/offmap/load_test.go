package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/offmap/offmap/offmap"
)

// randomEntries returns n entries whose keys and values are printable
// text, UTF-8 with escapes, or arbitrary bytes, of lengths from 0 to max.
func randomEntries(n, maxKey, maxValue int) map[string]string {
	r := rand.New(rand.NewPCG(3, 4))
	field := func(max int) string {
		b := make([]byte, r.IntN(max+1))
		switch r.IntN(3) {
		case 0: // text, with the characters a line format must escape
			const chars = "abcdefghijklmnopqrstuvwxyz0123456789 \"\\\n\t#{}:,"
			for i := range b {
				b[i] = chars[r.IntN(len(chars))]
			}
		case 1: // UTF-8 beyond ASCII
			s := strings.Repeat("é✓𝄞\u2028", len(b)/10+1)
			b = []byte(s[:len(b)])
		default: // arbitrary bytes
			for i := range b {
				b[i] = byte(r.Uint32())
			}
		}
		return string(b)
	}
	e := make(map[string]string, n)
	for len(e) < n {
		e[fmt.Sprintf("%d:%s", len(e), field(maxKey-8))] = field(maxValue)
	}
	e[""] = "the empty key"
	return e
}

// TestDumpLoadRoundTrip: dump | load copies 100,000 entries with binary
// keys and values exactly, in each of the three forms.
func TestDumpLoadRoundTrip(t *testing.T) {
	const n = 100_000
	src := newMap(t, 110_000, 36, 66, "--max-key", "64", "--max-value", "128")
	entries := randomEntries(n-1, 64, 128)
	fill(t, src, entries)
	ok(t, "verify", src)
	dir := t.TempDir()
	for _, form := range [][]string{nil, {"--hex"}, {"--json"}} {
		name := "text"
		if form != nil {
			name = form[0][2:]
		}
		t.Run(name, func(t *testing.T) {
			dump := filepath.Join(dir, name+".dump")
			out := ok(t, append([]string{"dump", src}, form...)...)
			if err := os.WriteFile(dump, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, name+".map")
			args := []string{"load", dst, dump}
			if name == "json" { // no layout line: size the new map
				args = append(args, "--entries", "110000", "--avg-key", "36", "--avg-value", "66", "--max-key", "64", "--max-value", "128")
			}
			ok(t, args...)
			ok(t, "verify", dst)
			sameContents(t, contents(t, dst), entries)
			// Dumped again, the same lines (in another order: the seed differs).
			again := ok(t, append([]string{"dump", dst}, form...)...)
			if !slices.Equal(sortedLines(again), sortedLines(out)) {
				t.Error("the dump of the loaded map differs from the original dump")
			}
		})
	}
	t.Run("pipe", func(t *testing.T) {
		dst := filepath.Join(dir, "piped.map")
		dump := exec.Command(offmapBin, "dump", src)
		load := exec.Command(offmapBin, "load", dst)
		pipe, err := dump.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		load.Stdin = pipe
		var dumpErr, loadErr bytes.Buffer
		dump.Stderr, load.Stderr = &dumpErr, &loadErr
		if err := dump.Start(); err != nil {
			t.Fatal(err)
		}
		if err := load.Run(); err != nil {
			t.Fatalf("load: %v %s", err, loadErr.String())
		}
		if err := dump.Wait(); err != nil {
			t.Fatalf("dump: %v %s", err, dumpErr.String())
		}
		sameContents(t, contents(t, dst), entries)
	})
}

func sortedLines(s string) []string {
	return slices.Sorted(slices.Values(strings.Split(s, "\n")))
}

// TestLoadExisting: loading into an existing map adds entries and
// replaces the values of keys present; the forms may be mixed.
func TestLoadExisting(t *testing.T) {
	path := newMap(t, 100, 8, 16)
	fill(t, path, map[string]string{"a": "old", "b": "kept"})
	input := strings.Join([]string{
		"# any comment",
		`"a" "new"`,
		``,
		`63 "hex key"`,
		`{"key":"d","value_hex":"00ff"}`,
		`"e" ""`,
		`{"key_hex":"","value":"empty key"}` + "\r", // CRLF line ends too
	}, "\n") // no final newline
	if r := offmapRun(t, strings.NewReader(input), "load", path); r.code != 0 {
		t.Fatal(r)
	}
	sameContents(t, contents(t, path), map[string]string{
		"a": "new", "b": "kept", "c": "hex key", "d": "\x00\xff", "e": "", "": "empty key",
	})
	// Size flags that contradict the existing file are refused.
	r := offmapRun(t, strings.NewReader(""), "load", "--entries", "5", path)
	oneErrorLine(t, r, 2, "size flags conflict with the layout of "+path+": --entries 5 but entries=100;")
	r = offmapRun(t, strings.NewReader(""), "load", "--max-file-size", "131072", path)
	oneErrorLine(t, r, 2, "size flags conflict with the layout of "+path+": --max-file-size 131072 but max-file-size=1073741824;")
	// Repeating the file's own limit is no conflict (it is rounded to 64 KiB).
	if r := offmapRun(t, strings.NewReader(`"f" "g"`), "load", "--max-file-size", "1073741825", path); r.code != 0 {
		t.Fatal(r)
	}
}

// TestLoadGrows: a map takes many more entries than it was made for, up
// to its maximum file size, which load sets for a new map.
func TestLoadGrows(t *testing.T) {
	var in strings.Builder
	want := make(map[string]string)
	for i := range 3000 {
		k, v := fmt.Sprintf("key%d", i), fmt.Sprintf("value %d", i)
		fmt.Fprintf(&in, "%q %q\n", k, v)
		want[k] = v
	}
	path := filepath.Join(t.TempDir(), "new.map")
	r := offmapRun(t, strings.NewReader(in.String()), "load", "--entries", "10", "--avg-key", "4", "--avg-value", "4",
		"--max-file-size", "1048576", path)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "created "+path+" and loaded 3000 entries: room for 10 entries to start, ") {
		t.Fatal(r)
	}
	sameContents(t, contents(t, path), want)
	ok(t, "verify", path)
	m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	m.Close()
	if st.MaxFileSize != 1<<20 || st.FileSize <= st.StartFileSize || st.FileSize > 1<<20 {
		t.Errorf("file of %d bytes, from %d, at most %d; want growth within 1 MiB", st.FileSize, st.StartFileSize, st.MaxFileSize)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, input, want string
	}{
		{"unquoted text", "\"a\" \"1\"\nplain text\n", `line 2: key: "plain" is neither a quoted string nor hexadecimal (the 1 entries before it are loaded)`},
		{"one field", "\"a\"\n", "line 1: want KEY VALUE separated by one space"},
		{"two spaces", "\"a\"  \"b\"\n", "line 1: missing value"},
		{"trailing text", "\"a\" \"b\" c\n", `line 1: unexpected " c" after the value`},
		{"bad escape", `"a\q" "b"` + "\n", "line 1: key: bad quoted string"},
		{"odd hex", "abc 00\n", "line 1: key: \"abc\" is neither a quoted string nor hexadecimal"},
		{"bad JSON", "{\"key\":\"a\"\n", "line 1: bad JSON"},
		{"unknown JSON field", `{"key":"a","value":"b","extra":1}` + "\n", `bad JSON: json: unknown field "extra"`},
		{"JSON without value", `{"key":"a"}` + "\n", `line 1: no "value" or "value_hex"`},
		{"JSON with both", `{"key":"a","key_hex":"61","value":""}` + "\n", `line 1: both "key" and "key_hex"`},
		{"JSON bad hex", `{"key_hex":"zz","value":""}` + "\n", `key_hex: "zz" is not hexadecimal`},
		{"bad layout", "# offmap dump 1: entries=lots\n", `line 1: bad layout field "entries=lots"`},
		{"value too large", `"k" "` + strings.Repeat("v", 300) + `"` + "\n", "line 1: value too large: 300 bytes"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			path := newMap(t, 100, 8, 16)
			r := offmapRun(t, strings.NewReader(c.input), "load", path)
			oneErrorLine(t, r, 2, c.want)
		})
	}

	// A missing input creates nothing.
	missing := filepath.Join(dir, "new.map")
	fails(t, 2, "no such file or directory", "load", missing, filepath.Join(dir, "no-input"))
	if _, err := os.Stat(missing); err == nil {
		t.Error("a failed load created the file")
	}
	// A dump with no layout line (JSON) and no size flags: a new map of
	// create's defaults.
	r := offmapRun(t, strings.NewReader(`{"key":"a","value":"b"}`), "load", missing)
	if r.code != 0 || r.stdout != "created "+missing+" and loaded 1 entries: room for 1024 entries to start, 16 segments, 384.0 KiB\n" {
		t.Fatalf("load of a JSON dump into a new map: %s", r)
	}
	if st := statsOf(t, missing); st.AverageKeySize != 32 || st.AverageValueSize != 64 || st.MaxValueSize != 4096 {
		t.Errorf("load made a map of keys %d, values %d/%d; want create's defaults", st.AverageKeySize, st.AverageValueSize, st.MaxValueSize)
	}
	sameContents(t, contents(t, missing), map[string]string{"a": "b"})

	// A full map (one that may not grow past its starting size) stops
	// the load at the line that did not fit.
	small := newMap(t, 10, 4, 4, "--max-file-size", "65536")
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "\"key%d\" \"value\"\n", i)
	}
	r = offmapRun(t, strings.NewReader(in.String()), "load", small)
	oneErrorLine(t, r, 2, "map is full")
	ok(t, "verify", small)
}

// TestLoadSummary: load prints how many entries it loaded and the map's
// size, as create and copy do.
func TestLoadSummary(t *testing.T) {
	src := newMap(t, 1000, 8, 16)
	fill(t, src, sampleEntries(300))
	dump := ok(t, "dump", src)
	dst := filepath.Join(t.TempDir(), "new.map")
	r := offmapRun(t, strings.NewReader(dump), "load", dst)
	if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "created "+dst+" and loaded 300 entries: room for 1000 entries to start, ") ||
		strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("load into a new map: %s", r)
	}
	// Into the existing map: 2 new keys, 1 replaced.
	r = offmapRun(t, strings.NewReader("\"key-0000\" \"x\"\n\"a\" \"1\"\n\"b\" \"2\"\n"), "load", dst)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "loaded 3 entries into "+dst+": 302 entries now, 15 segments, ") {
		t.Fatalf("load into an existing map: %s", r)
	}
	if got := contents(t, dst); len(got) != 302 || got["key-0000"] != "x" {
		t.Errorf("the map holds %d entries, key-0000 = %q", len(got), got["key-0000"])
	}
}

// TestLoadLayoutFlags: size flags may repeat the dump's layout line, but
// one that differs from it, or from an existing file's layout, is an error
// that creates and changes nothing; --mode applies to a new map only.
func TestLoadLayoutFlags(t *testing.T) {
	src := newMap(t, 1000, 8, 16)
	fill(t, src, sampleEntries(50))
	dir := t.TempDir()
	dump := filepath.Join(dir, "src.txt")
	if err := os.WriteFile(dump, []byte(ok(t, "dump", src)), 0o600); err != nil {
		t.Fatal(err)
	}
	segs := layoutOfFile(t, src).segments
	dst := filepath.Join(dir, "new.map")
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--entries", "2000000"}, "size flags conflict with the dump's layout line: --entries 2000000 but entries=1000; to load into another layout, make " + dst + " first with 'offmap create'"},
		{[]string{"--entries", "10", "--avg-value", "16"}, "size flags conflict with the dump's layout line: --entries 10 but entries=1000;"},
		{[]string{"--max-value", "4"}, "--max-value 4 but max-value=256;"},
		{[]string{"--avg-key", "8", "--segments", "2"}, fmt.Sprintf("--segments 2 but segments=%d;", segs)},
	} {
		r := offmapRun(t, nil, append([]string{"load", dst, dump}, c.flags...)...)
		oneErrorLine(t, r, 2, c.want)
		if _, err := os.Stat(dst); err == nil {
			t.Fatalf("load %q created %s", c.flags, dst)
		}
	}
	// Flags that repeat the layout line are fine.
	ok(t, "load", dst, dump, "--entries", "1000", "--avg-key", "8", "--mode", "0640")
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("load --mode 0640: %v %v", fi, err)
	}
	if l := layoutOfFile(t, dst); l != layoutOfFile(t, src) {
		t.Errorf("loaded map's layout %+v, the source's %+v", l, layoutOfFile(t, src))
	}

	// An existing file: its layout counts, not the dump's line.
	before, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	r := offmapRun(t, nil, "load", "--avg-value", "32", "--max-key", "100", dst, dump)
	oneErrorLine(t, r, 2, "size flags conflict with the layout of "+dst+": --avg-value 32 but avg-value=16, --max-key 100 but max-key=256;")
	r = offmapRun(t, nil, "load", "--mode", "0600", dst, dump)
	oneErrorLine(t, r, 2, "--mode applies to a new map only, and "+dst+" exists")
	if after, _ := os.ReadFile(dst); !bytes.Equal(before, after) {
		t.Error("a refused load changed the file")
	}
	// Loading a dump of another layout into an existing map.
	other := newMap(t, 5000, 16, 32)
	if out := ok(t, "load", other, dump); !strings.HasPrefix(out, "loaded 50 entries into "+other+": 50 entries now, 16 segments, ") {
		t.Errorf("load into a map of another layout: %q", out)
	}
}

// layoutOfFile returns the layout of the map file at path.
func layoutOfFile(t *testing.T, path string) layout {
	t.Helper()
	m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return layoutOf(m.Stats())
}
