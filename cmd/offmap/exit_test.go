package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFile copies the file src to a new file in a temporary directory,
// applies edit to its bytes, and returns its path.
func copyFile(t *testing.T, src string, edit func([]byte) []byte) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, edit(b), 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestExitCodes runs the error paths as a user meets them: 0 success; 1 a
// key absent (get, del) or problems found (verify, a damaged file
// included); 2 wrong arguments, a missing, foreign or damaged file read by
// any other command, a failed operation. Every failure is one line on
// stderr; problems found by verify are on stdout.
func TestExitCodes(t *testing.T) {
	good := newMap(t, 100, 8, 8)
	fill(t, good, map[string]string{"user1": "hello"})
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.map")
	foreign := filepath.Join(dir, "foreign.map")
	os.WriteFile(foreign, []byte("<html>not a map</html>\n"), 0o600)
	corrupt := copyFile(t, good, func(b []byte) []byte {
		b[140] ^= 0xff // a reserved byte under the checksum: the header no longer matches its checksum
		return b
	})
	problems := copyFile(t, good, func(b []byte) []byte {
		b[300] = 1 // a reserved byte past the checksum: the file opens, verify finds it
		return b
	})

	for _, c := range []struct {
		args []string
		code int
		msg  string // in the one line on stderr; "" for none
	}{
		// Success.
		{[]string{"get", good, "user1"}, 0, ""},
		{[]string{"verify", good}, 0, ""},
		{[]string{"stat", problems}, 0, ""},
		{[]string{"help"}, 0, ""},
		{[]string{"get", "--help"}, 0, ""},
		// Usage errors.
		{nil, 2, "offmap: no command given (see 'offmap help')"},
		{[]string{"frobnicate", good}, 2, `offmap: unknown command "frobnicate"`},
		{[]string{"get", good}, 2, "offmap: get: wrong number of arguments; usage: offmap get "},
		{[]string{"put", "--bogus", good, "k", "v"}, 2, "offmap: put: unknown flag --bogus (see 'offmap put --help')"},
		{[]string{"get", "--hex", good, "zz"}, 2, `key "zz" is not hexadecimal`},
		{[]string{"incr", good, "n", "lots"}, 2, `DELTA "lots" is not a 64-bit integer`},
		{[]string{"create", filepath.Join(dir, "new.map"), "--entries", "0"}, 2, "--entries must be positive"},
		// A missing file: never created.
		{[]string{"get", missing, "user1"}, 2, missing + ": no such file"},
		{[]string{"stat", missing}, 2, missing + ": no such file"},
		{[]string{"verify", missing}, 2, missing + ": no such file"},
		{[]string{"get", dir, "user1"}, 2, dir + " is a directory, not a map file"},
		// A foreign or damaged file: an open error, but problems for verify.
		{[]string{"get", foreign, "user1"}, 2, "not a file of this kind: wrong magic number"},
		{[]string{"dump", foreign}, 2, "not a file of this kind"},
		{[]string{"verify", foreign}, 1, "offmap: verify: open " + foreign + ": not a file of this kind"},
		{[]string{"get", corrupt, "user1"}, 2, "corrupt"},
		{[]string{"put", corrupt, "k", "v"}, 2, "corrupt"},
		{[]string{"verify", corrupt}, 1, "corrupt"},
		// An absent key.
		{[]string{"get", good, "nobody"}, 1, `offmap: get: key "nobody" not found`},
		{[]string{"del", good, "nobody"}, 1, `offmap: del: key "nobody" not found`},
		// Problems found.
		{[]string{"verify", problems}, 1, ""},
		// A failed operation.
		{[]string{"put", good, "k", strings.Repeat("v", 1000)}, 2, "value too large"},
	} {
		r := offmapRun(t, nil, c.args...)
		if r.code != c.code {
			t.Errorf("offmap %q: want exit %d, got %s", c.args, c.code, r)
			continue
		}
		if c.msg == "" {
			if r.stderr != "" {
				t.Errorf("offmap %q: stderr %q", c.args, r.stderr)
			}
			continue
		}
		if !strings.HasPrefix(r.stderr, "offmap: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("offmap %q: stderr %q, want one line with %q", c.args, r.stderr, c.msg)
		}
		if r.stdout != "" {
			t.Errorf("offmap %q printed %q", c.args, r.stdout)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("a command created the missing file")
	}
	r := offmapRun(t, nil, "verify", problems)
	want := problems + ": 1 problems:\n  header: reserved byte at offset 300, outside the checksum, is not zero; recover clears it"
	if !strings.HasPrefix(r.stdout, want) {
		t.Errorf("verify found %q, want %q", r.stdout, want)
	}
}
