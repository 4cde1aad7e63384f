//go:build linux

package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestRestorable(t *testing.T) {
	for _, c := range [][3]string{
		{"buffer_size_kb", "7 (expanded: 1408)", "1408"},
		{"buffer_size_kb", "65536", "65536"},
		{"trace_clock", "[local] global counter mono", "local"},
		{"trace_clock", "local global [mono] x86-tsc", "mono"},
		{"tracing_on", "1", "1"},
	} {
		if got := restorable(c[0], c[1]); got != c[2] {
			t.Errorf("restorable(%s, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-min", "0", "--", "true"},
		{"-top", "-1", "--", "true"},
		{"-buffer-kb", "1", "--", "true"},
		{"-bogus"},
	} {
		var out, errOut bytes.Buffer
		if got := run(args, nil, &out, &errOut); got != 2 {
			t.Errorf("schedgaps %q: exit %d, want 2 (stderr %q)", args, got, errOut.String())
		}
		if errOut.Len() == 0 {
			t.Errorf("schedgaps %q: no message", args)
		}
	}
}

// tracing returns the tracefs, or skips the test unless asked for with
// OFFMAP_TRACEFS_TESTS=1: the test changes machine-wide tracing settings
// while it runs (and restores them), which a plain `go test ./...` must
// not do. It also skips where tracing is not allowed (not root, no
// tracefs).
func tracing(t *testing.T) *tracefs {
	if os.Getenv("OFFMAP_TRACEFS_TESTS") != "1" {
		t.Skip("changes kernel tracing settings: set OFFMAP_TRACEFS_TESTS=1 to run it")
	}
	tr, err := openTracefs()
	if err != nil {
		t.Skip("no tracing here:", err)
	}
	if _, err := tr.read("tracing_on"); err != nil {
		t.Skip("no tracing here:", err)
	}
	if err := tr.write("options/record-tgid", mustRead(t, tr, "options/record-tgid")); err != nil {
		t.Skip("tracing settings are read-only here:", err)
	}
	return tr
}

// sameSetting compares a tracing setting before and after a run. The
// kernel rounds the buffer size it is given to whole pages of its
// sub-buffers: writing back 1408 KiB may read back as 1410.
func sameSetting(name, a, b string) bool {
	if name != "buffer_size_kb" {
		return a == b
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return err1 == nil && err2 == nil && max(x-y, y-x) <= max(x, y)/50
}

func mustRead(t *testing.T, tr *tracefs, name string) string {
	v, err := tr.read(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The command runs under the trace, its process is reported with the CPU
// time it used, its exit status is passed on, and the tracing settings
// are as they were.
func TestTraceCommand(t *testing.T) {
	tr := tracing(t)
	before := map[string]string{}
	for _, f := range tracingFiles {
		before[f] = restorable(f, mustRead(t, tr, f))
	}
	var out, errOut bytes.Buffer
	// A shell that counts to 100,000: some tens of milliseconds of CPU.
	loop := `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo counted $i`
	if got := run([]string{"-min", "1us", "--", "sh", "-c", loop}, nil, &out, &errOut); got != 0 {
		t.Fatalf("exit %d: %s", got, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "counted 100000\n") {
		t.Errorf("the command's output is not passed through:\n%s", out.String())
	}
	m := regexp.MustCompile(`process \d+ \(sh\): on CPU (\d+\.\d+) s`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no report on the shell:\n%s", out.String())
	}
	if cpu, _ := strconv.ParseFloat(m[1], 64); cpu <= 0 {
		t.Errorf("the shell used %v s of CPU, want more than 0:\n%s", cpu, out.String())
	}
	for _, f := range tracingFiles {
		if got := restorable(f, mustRead(t, tr, f)); !sameSetting(f, got, before[f]) {
			t.Errorf("%s is %q after the run, was %q", f, got, before[f])
		}
	}

	out.Reset()
	errOut.Reset()
	if got := run([]string{"--", "sh", "-c", "exit 3"}, nil, &out, &errOut); got != 3 {
		t.Errorf("a command exiting 3: schedgaps exits %d, want 3", got)
	}
	if got := run([]string{"--", "/nonexistent/command"}, nil, &out, &errOut); got != 1 {
		t.Errorf("a command that cannot start: schedgaps exits %d, want 1", got)
	}
}
