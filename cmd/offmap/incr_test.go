package main

import (
	"fmt"
	"sync"
	"testing"
)

func TestIncr(t *testing.T) {
	path := newMap(t, 100, 8, 8)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"incr", path, "hits"}, "1\n"},
		{[]string{"incr", path, "hits", "10"}, "11\n"},
		{[]string{"incr", path, "hits", "-20"}, "-9\n"},
		{[]string{"incr", path, "--hex", "00ff", "5"}, "5\n"},
		{[]string{"incr", path, "max", "9223372036854775807"}, "9223372036854775807\n"},
		{[]string{"incr", path, "max"}, "-9223372036854775808\n"}, // wraps, like the handle's Add
		{[]string{"get", "--int64", path, "hits"}, "-9\n"},
	} {
		if got := ok(t, c.args...); got != c.want {
			t.Errorf("offmap %q: %q, want %q", c.args, got, c.want)
		}
	}
	// The value is the 8 little-endian bytes an Int64 handle uses.
	if got := contents(t, path)["hits"]; got != "\xf7\xff\xff\xff\xff\xff\xff\xff" {
		t.Errorf("stored %q", got)
	}
	// Not pinned: a value of another size may replace it.
	ok(t, "put", path, "hits", "text")

	fails(t, 2, "holds a 4-byte value, not an 8-byte integer", "incr", path, "hits")
	fails(t, 2, `DELTA "1.5" is not a 64-bit integer`, "incr", path, "x", "1.5")
	fails(t, 2, "wrong number of arguments", "incr", path)
}

// TestIncrConcurrent: increments by concurrent processes are never lost.
func TestIncrConcurrent(t *testing.T) {
	path := newMap(t, 100, 8, 8)
	const procs, each = 4, 10
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			for range each {
				if r := offmapRun(t, nil, "incr", path, "n", "3"); r.code != 0 {
					t.Errorf("incr: %s", r)
				}
			}
		})
	}
	wg.Wait()
	if got := ok(t, "get", "--int64", path, "n"); got != fmt.Sprintf("%d\n", 3*procs*each) {
		t.Errorf("after %d increments of 3: %s", procs*each, got)
	}
}
