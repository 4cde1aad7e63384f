package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// special holds keys and values that a line format could mangle.
var special = map[string]string{
	"plain":                  "hello",
	"":                       "empty key",
	"empty value":            "",
	"quote\"back\\":          "new\nline\ttab\rcr",
	"\x00\x01\xff\xfe":       "\x80 invalid UTF-8 \xc3",
	"unicode é ✓ 𝄞":          "\u2028\u2029\u00a0",
	"#not a comment":         "{\"not\": \"json\"}",
	"{\"key\":\"x\"}":        "# neither",
	"surrogate \xed\xa0\x80": "del \x7f",
	"space ":                 " leading space",
}

func TestDumpText(t *testing.T) {
	path := newMap(t, 100, 8, 16, "--segments", "2")
	fill(t, path, special)
	lines := strings.Split(strings.TrimSuffix(ok(t, "dump", path), "\n"), "\n")
	if want := "# offmap dump 1: entries=100 avg-key=8 avg-value=16 max-key=256 max-value=256 segments=2"; lines[0] != want {
		t.Errorf("layout line %q, want %q", lines[0], want)
	}
	var want []string
	for k, v := range special {
		want = append(want, strconv.Quote(k)+" "+strconv.Quote(v))
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(lines[1:]))
	if !slices.Equal(got, want) {
		t.Errorf("dump:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDumpHex(t *testing.T) {
	path := newMap(t, 100, 8, 16)
	fill(t, path, special)
	lines := strings.Split(strings.TrimSuffix(ok(t, "dump", "--hex", path), "\n"), "\n")
	var want []string
	for k, v := range special {
		want = append(want, hexField(k)+" "+hexField(v))
	}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(lines[1:])); !slices.Equal(got, want) {
		t.Errorf("dump --hex:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func hexField(s string) string {
	if s == "" {
		return `""`
	}
	return hex.EncodeToString([]byte(s))
}

func TestDumpJSON(t *testing.T) {
	path := newMap(t, 100, 8, 16)
	fill(t, path, special)
	for _, isHex := range []bool{false, true} {
		args := []string{"dump", "--json", path}
		if isHex {
			args = append(args, "--hex")
		}
		got := make(map[string]string)
		for _, line := range strings.Split(strings.TrimSuffix(ok(t, args...), "\n"), "\n") {
			var j map[string]string
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			k, kok := j["key"]
			v, vok := j["value"]
			if kh, ok := j["key_hex"]; ok {
				b, _ := hex.DecodeString(kh)
				k, kok = string(b), !kok
			}
			if vh, ok := j["value_hex"]; ok {
				b, _ := hex.DecodeString(vh)
				v, vok = string(b), !vok
			}
			if !kok || !vok || len(j) != 2 {
				t.Fatalf("line %q: want one key and one value field", line)
			}
			if isHex && (j["key_hex"] == "" && k != "" || strings.Contains(line, `"key"`)) {
				t.Errorf("--hex line has a text field: %q", line)
			}
			got[k] = v
		}
		sameContents(t, got, special)
	}
}

func TestDumpEmptyAndErrors(t *testing.T) {
	path := newMap(t, 100, 8, 16)
	if out := ok(t, "dump", path); strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "# offmap dump 1:") {
		t.Errorf("dump of an empty map: %q", out)
	}
	if out := ok(t, "dump", "--json", path); out != "" {
		t.Errorf("dump --json of an empty map: %q", out)
	}
	fails(t, 2, "no such file", "dump", t.TempDir()+"/missing.map")
	fails(t, 2, "wrong number of arguments", "dump")
}

// TestDumpFileTruncatedMeanwhile: a map file truncated while dump reads it
// (outside the library's guarantees: the kernel raises SIGBUS) ends dump
// with one error line, not a crash.
func TestDumpFileTruncatedMeanwhile(t *testing.T) {
	path := newMap(t, 20000, 8, 16)
	fill(t, path, sampleEntries(10000))
	cmd := exec.Command(offmapBin, "dump", path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first byte arrives when dump flushes its first 64 KiB: it is in
	// the middle of the map, and blocks once the pipe is full.
	if _, err := io.ReadFull(stdout, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 8192); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	r := result{stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	if err == nil {
		t.Fatal("dump of a truncated file succeeded")
	}
	oneErrorLine(t, r, 2, "offmap: dump: memory fault at 0x")
}
