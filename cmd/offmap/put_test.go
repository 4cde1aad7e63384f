package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPut(t *testing.T) {
	path := newMap(t, 100, 8, 8)
	ok(t, "put", path, "user1", "hello")
	ok(t, "put", path, "user1", "hello again") // replaces
	ok(t, "put", "--hex", path, "00ff", "")
	ok(t, "put", path, "", "empty key")
	ok(t, "put", path, "--", "-k", "-5")
	sameContents(t, contents(t, path), map[string]string{
		"user1": "hello again", "\x00\xff": "", "": "empty key", "-k": "-5",
	})
	ok(t, "verify", path)
}

func TestPutErrors(t *testing.T) {
	path := newMap(t, 100, 8, 8) // keys and values of at most 256 bytes
	fails(t, 2, "key too large: 257 bytes, the map's MaxKeySize is 256", "put", path, strings.Repeat("k", 257), "v")
	fails(t, 2, "value too large: 300 bytes", "put", path, "k", strings.Repeat("v", 300))
	fails(t, 2, `value "0g" is not hexadecimal`, "put", "--hex", path, "00", "0g")
	fails(t, 2, "wrong number of arguments", "put", path, "k")

	// A full map refuses and changes nothing. A map grows past the
	// entries it was made for, up to its maximum file size: here its
	// starting size.
	small := newMap(t, 10, 4, 4, "--max-file-size", "65536")
	n := 0
	for ; n < 1000; n++ {
		r := offmapRun(t, nil, "put", small, strings.Repeat("k", n%5)+string(rune('a'+n%26))+strings.Repeat("x", n/130), "v")
		if r.code != 0 {
			oneErrorLine(t, r, 2, "map is full")
			break
		}
	}
	if n == 1000 {
		t.Fatal("a map for 10 entries in at most 64 KiB took 1000")
	}
	ok(t, "verify", small)

	missing := filepath.Join(t.TempDir(), "missing.map")
	fails(t, 2, "no such file", "put", missing, "k", "v")
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("put created the missing file")
	}
}
