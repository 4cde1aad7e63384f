package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	path := newMap(t, 100, 8, 8)
	fill(t, path, map[string]string{
		"user1":       "hello",
		"bin\x00\xff": "\x01\x02",
		"n":           "\x2a\x00\x00\x00\x00\x00\x00\x00",
		"m":           "\xfe\xff\xff\xff\xff\xff\xff\xff",
		"empty":       "",
		"-dash":       "d",
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", path, "user1"}, "hello\n"},
		{[]string{"get", path, "7573657231", "--hex"}, "68656c6c6f\n"},
		{[]string{"get", "--hex", path, "62696e00ff"}, "0102\n"},
		{[]string{"get", path, "empty"}, "\n"},
		{[]string{"get", "--int64", path, "n"}, "42\n"},
		{[]string{"get", path, "--int64", "m"}, "-2\n"},
		{[]string{"get", path, "--", "-dash"}, "d\n"},
	} {
		if got := ok(t, c.args...); got != c.want {
			t.Errorf("offmap %q: %q, want %q", c.args, got, c.want)
		}
	}
	fails(t, 1, `key "nope" not found`, "get", path, "nope")
	fails(t, 1, "not found", "get", "--hex", path, "00")
	fails(t, 2, "holds a 5-byte value, not an 8-byte integer", "get", "--int64", path, "user1")
	fails(t, 2, "is not hexadecimal", "get", "--hex", path, "xyz")
	fails(t, 2, "--hex and --int64 exclude each other", "get", "--hex", "--int64", path, "00")
	fails(t, 2, "wrong number of arguments", "get", path)
	fails(t, 2, "wrong number of arguments", "get", path, "a", "b")
	fails(t, 2, "unknown flag --dash", "get", path, "-dash")
}

func TestGetMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.map")
	fails(t, 2, "no such file", "get", missing, "k")
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("get created the missing file")
	}
}

// TestGetNotPrintable: on a terminal, get does not print a value that is
// not text but says how to read it (exit 2); into a pipe or a file the
// bytes go out as they are.
func TestGetNotPrintable(t *testing.T) {
	path := newMap(t, 100, 8, 8)
	fill(t, path, map[string]string{
		"n":    "\x2a\x00\x00\x00\x00\x00\x00\x00",
		"bin":  "\x1b[2J\x00",
		"utf8": "caf\xc3\xa9\tbar\nbaz",
		"bad":  "caf\xe9",
	})
	for _, c := range []struct {
		key, want string
		code      int
	}{
		{"n", `offmap: get: key "n" holds 8 bytes that are not printable text: read them with --hex, or with --int64 if it is a counter (or redirect stdout to get the bytes as they are)`, 2},
		{"bin", `offmap: get: key "bin" holds 5 bytes that are not printable text: read them with --hex (or redirect stdout to get the bytes as they are)`, 2},
		{"bad", `key "bad" holds 4 bytes that are not printable text: read them with --hex (or`, 2},
		{"utf8", "café\tbar\r\nbaz\r\n", 0}, // the terminal turns \n into \r\n
	} {
		screen, code := runOnTerminal(t, "get", path, c.key)
		if code != c.code || !strings.Contains(screen, c.want) || strings.Contains(screen, "\x1b[2J") {
			t.Errorf("get %s on a terminal: exit %d, screen %q, want %d %q", c.key, code, screen, c.code, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--hex", path, "62696e"}, "1b5b324a00\r\n"},
		{[]string{"--int64", path, "n"}, "42\r\n"},
	} {
		args, want := c.args, c.want
		if screen, code := runOnTerminal(t, append([]string{"get"}, args...)...); code != 0 || screen != want {
			t.Errorf("get %q on a terminal: exit %d %q, want %q", args, code, screen, want)
		}
	}
	// Into a pipe: the bytes as they are.
	if got := ok(t, "get", path, "bin"); got != "\x1b[2J\x00\n" {
		t.Errorf("get bin into a pipe: %q", got)
	}
}

// runOnTerminal runs offmap with stdout and stderr on a terminal and
// returns what the terminal showed and the exit status.
func runOnTerminal(t *testing.T, args ...string) (string, int) {
	t.Helper()
	master, tty := openPTY(t)
	screen := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO once no process has the tty open
		screen <- b
	}()
	cmd := exec.Command(offmapBin, args...)
	cmd.Stdout, cmd.Stderr = tty, tty
	err := cmd.Run()
	tty.Close()
	out := string(<-screen)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out, code
}
