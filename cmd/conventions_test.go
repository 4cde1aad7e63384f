// Package cmd_test checks that the commands of this module follow the
// conventions of docs/CLI.md: help on stdout with status 0, a usage
// error as one line on stderr with status 2, flags named as they are
// written.
package cmd_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tools are the commands built from this module.
var tools = []string{"offmap", "offqueue", "edabench"}

func TestHelpAndBadFlag(t *testing.T) {
	dir := t.TempDir()
	for _, tool := range tools {
		bin := filepath.Join(dir, tool)
		if out, err := exec.Command("go", "build", "-o", bin, "./"+tool).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", tool, err, out)
		}
		t.Run(tool, func(t *testing.T) { checkTool(t, bin, tool) })
	}
}

// checkTool checks the overview, every command's help and a bad flag of
// every command. The commands are those the overview lists.
func checkTool(t *testing.T, bin, tool string) {
	var overview string
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		stdout := wantHelp(t, bin, args...)
		if overview != "" && stdout != overview {
			t.Errorf("%s %s: not the overview 'help' prints", tool, args[0])
		}
		overview = stdout
	}
	cmds := listedCommands(overview)
	if len(cmds) < 3 {
		t.Fatalf("%s help lists %d commands:\n%s", tool, len(cmds), overview)
	}
	for _, cmd := range cmds {
		help := wantHelp(t, bin, cmd, "--help")
		if !strings.HasPrefix(help, "usage: "+tool+" "+cmd) || !strings.Contains(help, "\nexamples:\n") {
			t.Errorf("%s %s --help does not start with its usage or lacks examples:\n%s", tool, cmd, help)
		}
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "-help"}, {"help", cmd}} {
			if got := wantHelp(t, bin, args...); got != help {
				t.Errorf("%s %s: not what '%s --help' prints", tool, strings.Join(args, " "), cmd)
			}
		}
		// One dash or two, the error writes a long flag with two.
		for _, flag := range []string{"-no-such-flag", "--no-such-flag"} {
			want := tool + ": " + cmd + ": unknown flag --no-such-flag (see '" + tool + " " + cmd + " --help')\n"
			stdout, stderr, code := runTool(t, bin, cmd, flag)
			if code != 2 || stdout != "" || stderr != want {
				t.Errorf("%s %s %s: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, stderr %q",
					tool, cmd, flag, code, stdout, stderr, want)
			}
		}
	}
	stdout, stderr, code := runTool(t, bin, "no-such-command")
	want := tool + ": unknown command \"no-such-command\" (see '" + tool + " help')\n"
	if code != 2 || stdout != "" || stderr != want {
		t.Errorf("%s no-such-command: exit %d, stdout %q, stderr %q; want 2 and %q", tool, code, stdout, stderr, want)
	}
}

// wantHelp runs bin with args, checks that it printed help on stdout
// alone with status 0, and returns it.
func wantHelp(t *testing.T, bin string, args ...string) string {
	t.Helper()
	stdout, stderr, code := runTool(t, bin, args...)
	if code != 0 || stderr != "" || !strings.Contains(stdout, "usage: ") {
		t.Errorf("%s %s: exit %d, stderr %q, stdout %q; want help on stdout and exit 0",
			filepath.Base(bin), strings.Join(args, " "), code, stderr, stdout)
	}
	return stdout
}

// listedCommands returns the commands of an overview's "commands:" list.
func listedCommands(overview string) []string {
	_, list, _ := strings.Cut(overview, "\ncommands:\n")
	var cmds []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, "   ") {
			cmds = append(cmds, f[0])
		}
	}
	return cmds
}

func runTool(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader("")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", bin, err)
	}
	return out.String(), errb.String(), code
}
