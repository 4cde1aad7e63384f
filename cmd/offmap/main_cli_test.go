package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelp: every command has --help with its usage, flags and an example.
func TestHelp(t *testing.T) {
	overview := ok(t, "help")
	for _, cmd := range commands {
		if !strings.Contains(overview, "  "+cmd.name+" ") {
			t.Errorf("'offmap help' does not list %s", cmd.name)
		}
		for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}, {"help", cmd.name}} {
			out := ok(t, args...)
			if !strings.HasPrefix(out, "usage: offmap "+cmd.name+" ") ||
				!strings.Contains(out, "\nexamples:\n  ") || !strings.Contains(out, "\n  offmap "+cmd.name+" ") {
				t.Errorf("offmap %s: no usage line or example:\n%s", strings.Join(args, " "), out)
			}
		}
	}
	if out := ok(t, "--help"); out != overview {
		t.Errorf("--help and help differ")
	}
	fails(t, 2, "no command given")
	fails(t, 2, `unknown command "frobnicate"`, "frobnicate")
	fails(t, 2, `unknown command "frobnicate"`, "help", "frobnicate")
}

// TestHelpWidth: every line of the help fits in 80 columns: descriptions
// of flags are wrapped between words, and long examples are continued
// with a backslash, which a shell reads as one command.
func TestHelpWidth(t *testing.T) {
	helps := map[string]string{"help": ok(t, "help")}
	for _, cmd := range commands {
		helps[cmd.name] = ok(t, cmd.name, "--help")
	}
	for name, h := range helps {
		for _, line := range strings.Split(h, "\n") {
			if len(strings.ReplaceAll(line, "\t", "        ")) > 80 {
				t.Errorf("offmap %s --help: a line wider than 80 columns: %q", name, line)
			}
		}
	}
	// A wrapped flag description goes on under the description column.
	if !strings.Contains(helps["create"], "\n  --segments N         N independently locked segments (default: about one per\n                       1024 entries, at least 16); 1e6 and 1_000_000 are\n                       accepted\n") {
		t.Errorf("create --help:\n%s", helps["create"])
	}
}

// TestBadArguments: wrong arguments to every command get one error line
// and exit 2.
func TestBadArguments(t *testing.T) {
	for _, cmd := range commands {
		r := offmapRun(t, nil, cmd.name)
		oneErrorLine(t, r, 2, "offmap: "+cmd.name+": ")
		r = offmapRun(t, nil, cmd.name, "--no-such-flag", "x")
		oneErrorLine(t, r, 2, "unknown flag --no-such-flag (see 'offmap "+cmd.name+" --help')")
	}
}

// TestBadFiles: every command given a missing, empty, foreign or truncated
// file prints one error line and exits non-zero, creating and changing
// nothing (but load, which creates a missing map).
func TestBadFiles(t *testing.T) {
	good, _, _ := soundFile(t)
	goodBytes, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{
		"empty":     nil,
		"foreign":   []byte("<html>not a map</html>\n"),
		"truncated": goodBytes[:len(goodBytes)/3],
	}
	wants := map[string]string{
		"missing":   "no such file",
		"empty":     "file is empty",
		"foreign":   "not a file of this kind: wrong magic number",
		"truncated": "file is truncated",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"missing", "empty", "foreign", "truncated"} {
		path := filepath.Join(dir, name)
		out := filepath.Join(dir, "out.map")
		for _, args := range [][]string{
			{"stat", path}, {"stat", "--json", path}, {"get", path, "k"}, {"put", path, "k", "v"},
			{"del", path, "k"}, {"incr", path, "k"}, {"dump", path}, {"load", path, os.DevNull},
			{"verify", path}, {"recover", path}, {"copy", path, out},
		} {
			if args[0] == "load" && name == "missing" {
				continue // load creates a missing map (TestLoadErrors)
			}
			r := offmapRun(t, nil, args...)
			code := 2
			if args[0] == "verify" && name != "missing" {
				code = 1 // a damaged file is verify's negative answer
			}
			oneErrorLine(t, r, code, wants[name])
			if r.stdout != "" {
				t.Errorf("offmap %s printed %q", strings.Join(args, " "), r.stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("offmap %s created %s", strings.Join(args, " "), out)
			}
		}
		if name == "missing" {
			if _, err := os.Stat(path); err == nil {
				t.Fatal("a command created the missing file")
			}
			continue
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, files[name]) {
			t.Errorf("the %s file was changed", name)
		}
	}
}
