package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mainEnv makes the test binary run main() itself (offrepl with the
// arguments it was given), so that a test can send a real SIGTERM to a
// real offrepl process. It is checked in an init function, which runs
// before any test.
const mainEnv = "OFFREPL_TEST_MAIN"

func init() {
	if os.Getenv(mainEnv) == "1" {
		main() // exits
	}
}

// testCommand records the flags it ran with.
var testCommand = &command{
	name: "testjob", summary: "a job for the tests", help: "Runs nothing.", examples: "  # nothing\n  offrepl testjob\n",
	setup: func(fs *flag.FlagSet) func(context.Context, <-chan time.Time, *reporter) error {
		a := fs.String("a", "", "a")
		b := fs.Int("b", 0, "b")
		return func(ctx context.Context, _ <-chan time.Time, rep *reporter) error {
			rep.Line("a=" + *a + " b=" + strconv.Itoa(*b))
			return nil
		}
	},
}

func TestConfigFile(t *testing.T) {
	commands = append(commands, testCommand)
	defer func() { commands = commands[:len(commands)-1] }()
	cfg := filepath.Join(t.TempDir(), "job.conf")
	if err := os.WriteFile(cfg, []byte("# a job\na = from file\n--b 3 # trailing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"testjob", "--config", cfg, "--b", "5"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasSuffix(strings.TrimSpace(out.String()), "testjob: a=from file b=5") {
		t.Fatalf("ran with %q, want a from the file and b from the command line", out.String())
	}
	if err := os.WriteFile(cfg, []byte("c 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"testjob", "--config", cfg}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `job.conf:1: unknown flag "c"`) {
		t.Fatalf("exit %d, stderr %q; want 2 and the unknown flag named", code, errOut.String())
	}
}

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	overview := out.String()
	for _, cmd := range commands {
		if !strings.Contains(overview, "\n  "+cmd.name+" ") {
			t.Errorf("overview lacks %s", cmd.name)
		}
		out.Reset()
		if code := run(context.Background(), []string{cmd.name, "--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "examples:") {
			t.Errorf("%s --help: exit %d, %q", cmd.name, code, out.String())
		}
	}
	if code := run(context.Background(), []string{"nosuch"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command: exit %d, want 2", code)
	}
}

// safeBuffer is a bytes.Buffer that a process's output copier and the
// test's failure messages may use at once.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
