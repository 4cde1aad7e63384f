package main

import "testing"

func TestDel(t *testing.T) {
	path := newMap(t, 100, 8, 8)
	fill(t, path, map[string]string{"a": "1", "b": "2", "\x00": "3"})
	ok(t, "del", path, "a")
	ok(t, "del", "--hex", path, "00")
	fails(t, 1, `key "a" not found`, "del", path, "a")
	sameContents(t, contents(t, path), map[string]string{"b": "2"})
	fails(t, 2, "wrong number of arguments", "del", path)
	fails(t, 2, "no such file", "del", t.TempDir()+"/missing.map", "a")
}
