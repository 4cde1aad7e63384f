// Package selftest checks what the tests of offmap need of the system
// that runs them, so that a failure there is told apart from one of
// offmap's: .ci/run runs it under Wine (GOOS=windows, .ci/wine-exec)
// before the Windows tests. A test binary that re-runs itself as a
// helper process (internal/reexec) must get the helper's arguments,
// environment, standard input, output and error and exit status intact,
// and so must go test from the test binary (TestFailsWhenAsked).
package selftest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/offmap/offmap/internal/reexec"
)

// The helper process's roles, named by SELFTEST_CHILD.
var children = map[string]func() int{
	// echo writes its arguments (JSON) and its standard input to
	// standard output, SELFTEST_STDERR to standard error, and exits
	// with status SELFTEST_EXIT.
	"echo": func() int {
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 100
		}
		out, _ := json.Marshal(struct {
			Args  []string
			Stdin string
		}{os.Args[1:], string(in)})
		os.Stdout.Write(append(out, '\n'))
		os.Stderr.WriteString(os.Getenv("SELFTEST_STDERR"))
		var code int
		fmt.Sscan(os.Getenv("SELFTEST_EXIT"), &code)
		return code
	},
	// nest runs echo in a helper process of its own and passes on
	// what it wrote and its exit status.
	"nest": func() int {
		cmd := reexec.Command("-test.run=^$", "nested")
		cmd.Env = append(os.Environ(), "SELFTEST_CHILD=echo")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 101
		}
		return 0
	},
}

func TestMain(m *testing.M) {
	if role := os.Getenv("SELFTEST_CHILD"); role != "" {
		f := children[role]
		if f == nil {
			fmt.Fprintln(os.Stderr, "unknown child role", role)
			os.Exit(2)
		}
		os.Exit(f())
	}
	os.Exit(m.Run())
}

// run runs role in a helper process with args and returns what it wrote
// to standard output and error and its exit status.
func run(t *testing.T, role, stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := reexec.Command(append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"SELFTEST_CHILD=" + role}, env...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", role, err)
	}
	return out.String(), errOut.String(), code
}

// args are arguments whose quoting a command line could lose.
var args = []string{
	"plain", "two words", "", `quote"d`, `"`, `back\slash`, `trail\`, `C:\dir with space\`,
	`a\\"b`, "tab\there", "ü ß 日本", "-test.v", "%PATH%", "$HOME", "*",
}

func TestHelperProcess(t *testing.T) {
	for _, code := range []int{0, 1, 3, 255} {
		stderr := fmt.Sprintf("line 1 on stderr\nexit %d\n", code)
		stdin := "from the parent\r\nsecond line\n"
		out, errOut, got := run(t, "echo", stdin,
			[]string{"SELFTEST_STDERR=" + stderr, fmt.Sprintf("SELFTEST_EXIT=%d", code)}, args...)
		if got != code {
			t.Errorf("exit status %d, want %d (stderr %q)", got, code, errOut)
		}
		if errOut != stderr {
			t.Errorf("stderr %q, want %q", errOut, stderr)
		}
		var echo struct {
			Args  []string
			Stdin string
		}
		if err := json.Unmarshal([]byte(out), &echo); err != nil {
			t.Fatalf("stdout %q: %v", out, err)
		}
		if want := append([]string{"-test.run=^$"}, args...); !slices.Equal(echo.Args, want) {
			t.Errorf("helper's arguments %q, want %q", echo.Args, want)
		}
		if echo.Stdin != stdin {
			t.Errorf("helper's stdin %q, want %q", echo.Stdin, stdin)
		}
	}
}

// TestNestedHelper runs a helper that starts a helper of its own, as the
// queue's multi-process tests do.
func TestNestedHelper(t *testing.T) {
	out, errOut, code := run(t, "nest", "", []string{"SELFTEST_STDERR=nested stderr\n", "SELFTEST_EXIT=7"})
	if code != 7 || errOut != "nested stderr\n" || !strings.Contains(out, `"Args":["-test.run=^$","nested"]`) {
		t.Errorf("nested helper: exit %d, stdout %q, stderr %q; want 7, its arguments, %q", code, out, errOut, "nested stderr\n")
	}
}

// TestHelperOwnEnvironment runs a helper with an environment of its own
// (no PATH, no WINEPREFIX, ...): it is all the helper sees, and the helper
// still starts.
func TestHelperOwnEnvironment(t *testing.T) {
	cmd := reexec.Command("-test.run=^$", "own")
	cmd.Env = []string{"SELFTEST_CHILD=echo", "SELFTEST_EXIT=5", "SELFTEST_STDERR=own environment\n"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 || errOut.String() != "own environment\n" || !strings.Contains(out.String(), `"Args":["-test.run=^$","own"]`) {
		t.Errorf("helper with its own environment: %v, stdout %q, stderr %q; want exit 5, its arguments, %q", err, out.String(), errOut.String(), "own environment\n")
	}
}

// TestFailsWhenAsked fails when SELFTEST_FAIL is set: .ci/run checks that
// go test then reports the failure and exits 1.
func TestFailsWhenAsked(t *testing.T) {
	t.Log("a line of -test.v output")
	if os.Getenv("SELFTEST_FAIL") != "" {
		t.Fatal("failing as asked (SELFTEST_FAIL)")
	}
}
