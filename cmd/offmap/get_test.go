package main

import (
	"os"
	"path/filepath"
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
	fails(t, 2, "flag provided but not defined: -dash", "get", path, "-dash")
}

func TestGetMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.map")
	fails(t, 2, "no such file", "get", missing, "k")
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("get created the missing file")
	}
}
