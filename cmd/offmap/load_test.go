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
	oneErrorLine(t, r, 2, "options conflict with the existing file: Entries is 5 in the options but 100 in the file")
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

	// A new file needs a layout: from the dump's layout line or flags.
	missing := filepath.Join(dir, "new.map")
	r := offmapRun(t, strings.NewReader(`{"key":"a","value":"b"}`), "load", missing)
	oneErrorLine(t, r, 2, "a new map needs --entries, --avg-key and --avg-value")
	if _, err := os.Stat(missing); err == nil {
		t.Error("a failed load created the file")
	}
	fails(t, 2, "no such file or directory", "load", missing, filepath.Join(dir, "no-input"))

	// A full map stops the load at the line that did not fit.
	small := newMap(t, 10, 4, 4)
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "\"key%d\" \"value\"\n", i)
	}
	r = offmapRun(t, strings.NewReader(in.String()), "load", small)
	oneErrorLine(t, r, 2, "map is full")
	ok(t, "verify", small)
}
