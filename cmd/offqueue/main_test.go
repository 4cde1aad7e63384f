package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var bin string

// TestMain builds the command once for the end-to-end tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "offqueue-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "offqueue")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic("build: " + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func offqueue(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestAppendDumpStats(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	out, _, code := offqueue(t, "hello\nworld\n\x00\x01\n", "append", q)
	if code != 0 || out != "appended 3 messages, last 0:2\n" {
		t.Fatalf("append: %q %d", out, code)
	}
	out, _, code = offqueue(t, "", "dump", q)
	want := "0:0\t5\t\"hello\"\n0:1\t5\t\"world\"\n0:2\t2\t0001\n"
	if code != 0 || out != want {
		t.Fatalf("dump: %q, want %q", out, want)
	}
	out, _, _ = offqueue(t, "", "dump", "-hex", "-from", "0:1", "-n", "1", q)
	if out != "0:1\t5\t776f726c64\n" {
		t.Fatalf("dump -hex: %q", out)
	}
	out, _, code = offqueue(t, "", "stats", q)
	if code != 0 || !strings.Contains(out, "messages   3\n") || !strings.Contains(out, "roll       daily") {
		t.Fatalf("stats: %q", out)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"dump", filepath.Join(dir, "missing")}, 2, "offqueue: dump: " + filepath.Join(dir, "missing") + ": no such directory"},
		{[]string{"dump", dir}, 2, "offqueue: dump: open " + dir + ": directory is not a queue"},
		{[]string{"stats"}, 2, "offqueue: stats: wrong number of arguments"},
		{[]string{"dump", "-from", "x:y", dir}, 2, `offqueue: dump: --from "x:y" is not start, end or an index CYCLE:SEQ`},
		{[]string{"frobnicate"}, 2, "offqueue: unknown command"},
		{nil, 2, "offqueue: no command given"},
	}
	for _, c := range cases {
		out, errOut, code := offqueue(t, "", c.args...)
		if code != c.code || !strings.HasPrefix(errOut, c.msg) {
			t.Errorf("%v: exit %d %q, want %d %q", c.args, code, errOut, c.code, c.msg)
		}
		if strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("%v: error is not one line on stderr alone: %q %q", c.args, out, errOut)
		}
	}
	for _, sub := range []string{"dump", "follow", "stats", "verify", "append"} {
		out, errOut, code := offqueue(t, "", sub, "--help")
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: offqueue "+sub+" ") || !strings.Contains(out, "\nexamples:\n") {
			t.Errorf("%s --help: %d %q %q", sub, code, out, errOut)
		}
	}
}

func TestFollow(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	offqueue(t, "first\n", "append", q)
	cmd := exec.Command(bin, "follow", "-from", "start", q)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "0:0\t5\t\"first\"" {
		t.Fatalf("follow printed %q", sc.Text())
	}
	offqueue(t, "second\nthird\n", "append", q)
	for _, want := range []string{"0:1\t6\t\"second\"", "0:2\t5\t\"third\""} {
		if !sc.Scan() || sc.Text() != want {
			t.Fatalf("follow printed %q, want %q", sc.Text(), want)
		}
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("follow after SIGINT: %v", err)
	}
}

// TestVerify: a sound queue passes (exit 0); a damaged one gets one line
// per problem and exit 1.
func TestVerify(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	if _, _, code := offqueue(t, "a\nb\nc\n", "append", q); code != 0 {
		t.Fatal("append failed")
	}
	out, errOut, code := offqueue(t, "", "verify", q)
	if code != 0 || out != "ok: 1 cycle files, no problems\n" {
		t.Fatalf("verify of a sound queue: exit %d, %q %q", code, out, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(q, "*.oq"))
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A write hint (offset 128) far past the end of the file.
	if _, err := f.WriteAt([]byte{0, 0, 0, 1, 9, 0, 0, 0}, 128); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, _, code = offqueue(t, "", "verify", q)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], "write hint") || lines[1] != "1 problems" {
		t.Fatalf("verify of a damaged queue: exit %d, %q", code, out)
	}
}

// TestLast: dump --last N and follow -n N start at the last N messages,
// as tail -n does.
func TestLast(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	offqueue(t, "a\nb\nc\nd\n", "append", q)
	out, _, code := offqueue(t, "", "dump", "--last", "2", q)
	if code != 0 || out != "0:2\t1\t\"c\"\n0:3\t1\t\"d\"\n" {
		t.Fatalf("dump --last 2: exit %d, %q", code, out)
	}
	if out, _, _ := offqueue(t, "", "dump", "--last", "10", q); strings.Count(out, "\n") != 4 {
		t.Fatalf("dump --last 10 of 4 messages: %q", out)
	}
	if _, _, code := offqueue(t, "", "dump", "--last", "2", "--from", "0:1", q); code != 2 {
		t.Fatalf("dump --last with --from: exit %d, want 2", code)
	}

	cmd := exec.Command(bin, "follow", "-n", "1", q)
	out2, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out2)
	if !sc.Scan() || sc.Text() != "0:3\t1\t\"d\"" {
		t.Fatalf("follow -n 1 printed %q", sc.Text())
	}
	offqueue(t, "e\n", "append", q)
	if !sc.Scan() || sc.Text() != "0:4\t1\t\"e\"" {
		t.Fatalf("follow -n 1 then printed %q", sc.Text())
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("follow after SIGINT: %v", err)
	}
}
