package main

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/offmap/offmap/queue"
)

// TestDamagedTailerName: a named tailer's name length in queue.meta
// (offset 5120) damaged to values no slice can take: stats prints what it
// can, says which part is damaged and exits 2; verify reports it and
// exits 1; dump reads on. None panics.
func TestDamagedTailerName(t *testing.T) {
	good := newQueue(t, "a\nb\n")
	q, err := queue.Open(good, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.NamedTailer("audit"); err != nil {
		t.Fatal(err)
	}
	q.Close()
	for _, n := range []uint64{1<<64 - 1, 1<<63 | 5, 49} {
		dir := copyQueue(t, good)
		damage(t, dir, "queue.meta", 5120, binary.LittleEndian.AppendUint64(nil, n))
		out, errOut, code := offqueue(t, "", "stats", dir)
		if code != 2 || !strings.Contains(out, "tailer     error: ") || !strings.Contains(out, "has a name of") ||
			!strings.Contains(errOut, "could not be read (a named tailer)") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("length %#x: stats: exit %d\nstdout %q\nstderr %q", n, code, out, errOut)
		}
		out, errOut, code = offqueue(t, "", "stats", "--json", dir)
		if code != 2 || !strings.Contains(out, `"error": "file is corrupt: queue.meta: named tailer 0 has a name of`) || strings.Contains(errOut, "panic") {
			t.Errorf("length %#x: stats --json: exit %d\nstdout %q\nstderr %q", n, code, out, errOut)
		}
		out, _, code = offqueue(t, "", "verify", dir)
		if code != 1 || !strings.Contains(out, "named tailer 0 has a name of") {
			t.Errorf("length %#x: verify: exit %d, stdout %q", n, code, out)
		}
		out, errOut, code = offqueue(t, "", "dump", dir)
		if code != 0 || !strings.Contains(out, "\"a\"") || !strings.Contains(out, "\"b\"") {
			t.Errorf("length %#x: dump: exit %d\nstdout %q\nstderr %q", n, code, out, errOut)
		}
	}
}
