package main

import (
	"bytes"
	"errors"
	"flag"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/internal/cliargs"
)

// TestBuiltHelpAndBadFlag runs the built command as a user does and
// checks the conventions of docs/CLI.md: help on stdout with status 0, a
// bad flag as one line on stderr, naming the flag with two dashes
// whichever the user typed, with status 2.
func TestBuiltHelpAndBadFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "offrepl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	exe := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), errb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), 0
	}
	help := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := exe(args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "offrepl ") && !strings.HasPrefix(stdout, "usage: offrepl ") {
			t.Errorf("offrepl %s: exit %d, stderr %q, stdout %q; want help on stdout, exit 0", strings.Join(args, " "), code, stderr, stdout)
		}
		return stdout
	}
	overview := help("help")
	for _, args := range [][]string{{"--help"}, {"-h"}} {
		if got := help(args...); got != overview {
			t.Errorf("offrepl %s is not the overview", args[0])
		}
	}
	for _, name := range []string{"mirror", "ingest", "replica"} {
		if !strings.Contains(overview, "\n  "+name+" ") {
			t.Errorf("the overview does not list %s", name)
		}
		h := help(name, "--help")
		if !strings.HasPrefix(h, "usage: offrepl "+name+" ") || !strings.Contains(h, "\nexamples:\n") {
			t.Errorf("offrepl %s --help:\n%s", name, h)
		}
		for _, args := range [][]string{{name, "-h"}, {name, "-help"}, {"help", name}} {
			if got := help(args...); got != h {
				t.Errorf("offrepl %s is not '%s --help'", strings.Join(args, " "), name)
			}
		}
		for _, flag := range []string{"-no-such-flag", "--no-such-flag"} {
			want := "offrepl: " + name + ": unknown flag --no-such-flag (see 'offrepl " + name + " --help')\n"
			if stdout, stderr, code := exe(name, flag); code != 2 || stdout != "" || stderr != want {
				t.Errorf("offrepl %s %s: exit %d, stdout %q, stderr %q; want 2, nothing, %q", name, flag, code, stdout, stderr, want)
			}
		}
	}
	want := "offrepl: unknown command \"nosuch\" (see 'offrepl help')\n"
	if stdout, stderr, code := exe("nosuch"); code != 2 || stdout != "" || stderr != want {
		t.Errorf("offrepl nosuch: exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
	}
}

// TestSizeFlags: the size flags of replica take units and the counts
// exponents, as every tool's do.
func TestSizeFlags(t *testing.T) {
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	replicaSetup(fs)
	if _, err := cliargs.Parse(fs, []string{"--max-file-size", "256GiB", "--entries", "1e7", "--avg-value", "1.5KiB", "--max-value=1MB"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"max-file-size": 256 << 30, "entries": 10_000_000, "avg-value": 1536, "max-value": 1_000_000} {
		if got := fs.Lookup(name).Value.(flag.Getter).Get(); got != want {
			t.Errorf("--%s: %v, want %d", name, got, want)
		}
	}
	if _, err := cliargs.Parse(fs, []string{"--entries", "1.5"}); err == nil || err.Error() != `invalid value "1.5" for --entries: not a whole number` {
		t.Errorf("--entries 1.5: %v", err)
	}
}
