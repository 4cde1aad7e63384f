package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
)

func TestMessage(t *testing.T) {
	for in, want := range map[string]string{
		"ingest: queue: mkdir /q: not a directory":                      "mkdir /q: not a directory",
		"replica: offmap: open a.map: not a file of this kind":          "open a.map: not a file of this kind",
		"replica: jetstream KV_b: replica: bucket b: deadline exceeded": "jetstream KV_b: bucket b: deadline exceeded",
		"replica: the map is not a replica: a.map holds 3 keys and no " +
			"replica state (Config.TakeOver replaces them)": "the map is not a replica: a.map holds 3 keys and no replica state (--take-over replaces them)",
		"applied 0 error: mirror: nats: timeout":             "applied 0 error: nats: timeout",
		"stop the mirror: queue: closed":                     "stop the mirror: closed", // a prefix only at the start or after ": "
		"stored 0; error: ingest: connecting to nats://x: y": "stored 0; error: connecting to nats://x: y",
		"two\nlines":              "two; lines",
		"--queue /q: not a queue": "--queue /q: not a queue",
	} {
		if got := message(in); got != want {
			t.Errorf("message(%q) = %q, want %q", in, got, want)
		}
	}
}

// closedPort returns the address of a port on 127.0.0.1 that nothing
// listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestErrorsDoNotStutter: the error line of a job that cannot start says
// each thing once and names the flag to use.
func TestErrorsDoNotStutter(t *testing.T) {
	dir := t.TempDir()
	nats := "nats://" + closedPort(t)
	file := filepath.Join(dir, "file")
	garbage := filepath.Join(dir, "garbage.map")
	for _, p := range []string{file, garbage} {
		if err := os.WriteFile(p, []byte("not a map\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	full := filepath.Join(dir, "full.map")
	m, err := offmap.Open(full, offmap.Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	m.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ingest", "--queue", file, "--nats", nats, "--stream", "S"},
			"offrepl: ingest: mkdir " + file + ": not a directory\n"},
		{[]string{"replica", "--map", garbage, "--nats", nats, "--bucket", "b"},
			"offrepl: replica: open " + garbage + ": not a file of this kind: wrong magic number\n"},
		{[]string{"replica", "--map", full, "--nats", nats, "--bucket", "b"},
			"offrepl: replica: the map is not a replica: " + full + " holds 1 keys and no replica state (--take-over replaces them with the source's)\n"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errOut); code != 2 || errOut.String() != c.want {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// TestWaitingForNATS: while the NATS server cannot be reached, the
// progress line of every job says which servers it waits for and why
// it cannot reach them.
func TestWaitingForNATS(t *testing.T) {
	dir := t.TempDir()
	addr := closedPort(t)
	url := "nats://" + addr
	q := filepath.Join(dir, "q")
	lib, err := queue.Open(q, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lib.Close()
	want := "waiting for NATS at " + url + ": dial tcp " + addr + ": connect: connection refused"
	for _, args := range [][]string{
		{"replica", "--map", filepath.Join(dir, "r.map"), "--nats", url, "--bucket", "b"},
		{"ingest", "--queue", filepath.Join(dir, "in"), "--nats", url, "--stream", "S"},
		{"mirror", "--queue", q, "--source", "a", "--nats", url, "--stream", "S", "--subject", "s"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		var out, errOut bytes.Buffer
		code := run(ctx, append(args, "--progress", "200ms", "--retry-min", "50ms", "--retry-max", "100ms"), &out, &errOut)
		cancel()
		if code != 0 || !strings.Contains(out.String(), args[0]+": ") || !strings.Contains(out.String(), want) {
			t.Errorf("%s: exit %d, stdout:\n%s\nstderr:\n%s\nwant the progress to say %q", args[0], code, out.String(), errOut.String(), want)
		}
	}
}
