package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/bench/eda"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edabench-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "edabench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func edabench(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// quick is a setting short enough for a test.
func quick(dir string) []string {
	return []string{"-warmup", "300ms", "-runs", "2", "-run", "400ms", "-dir", dir}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"run", "-instances", "0"},
		{"run", "-wait", "sideways"},
		{"run", "-placement", "moon"},
		{"run", "-dir", "/no/such/dir"},
		{"run", "extra"},
		{"sweep", "-counts", "1,x"},
		{"sweep", "-verdict", "mostly"},
		{"run", "-pin", "sometimes"},
		{"sweep", "-time-limit", "soon"},
		{"chart", "-format", "gif"},
		{"chart", "-data", "/no/such/file.csv"},
	} {
		_, stderr, err := edabench(t, args...)
		if exitCode(err) == 0 {
			t.Errorf("%v: exit 0", args)
			continue
		}
		if strings.Contains(stderr, "goroutine") || strings.Count(strings.TrimSpace(stderr), "\n") > 40 {
			t.Errorf("%v: not a short error:\n%s", args, stderr)
		}
	}
}

func exitCode(err error) int {
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestRunPrintsTableAndJSON(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	stdout, stderr, err := edabench(t, append([]string{"run", "--instances", "3", "-o", out}, quick(dir)...)...)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "instances") || !strings.Contains(stdout, "        3 ") {
		t.Fatalf("no table row:\n%s", stdout)
	}
	checkLegend(t, stdout)
	if !strings.Contains(flat(stdout), "Result: at 3 instances the chain meets the SLA") {
		t.Fatalf("no result:\n%s", stdout)
	}
	checkResultJSON := func(what string, b []byte) {
		t.Helper()
		var rs []eda.Result
		if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 1 {
			t.Fatalf("%s: %v (%d results)", what, err, len(rs))
		}
		if r := rs[0]; r.Instances != 3 || r.Delivered != r.Sent || r.EndToEnd.Count == 0 || r.EndToEnd.P999 == 0 {
			t.Fatalf("%s: result: %+v", what, r)
		}
	}
	b, _ := os.ReadFile(out)
	checkResultJSON("--out file", b)
	// Nothing is left behind in the run directory.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("run left files: %v", entries)
	}

	// --json: the JSON alone on stdout, the table on stderr.
	stdout, stderr, err = edabench(t, append([]string{"run", "--instances", "3", "--json"}, quick(dir)...)...)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	checkResultJSON("--json stdout", []byte(stdout))
	if !strings.Contains(flat(stderr), "Result: at 3 instances the chain meets the SLA") {
		t.Fatalf("--json: no table on stderr:\n%s", stderr)
	}

	// The old -json FILE is refused with a pointer to --out.
	stdout, stderr, err = edabench(t, "run", "-json", out)
	if exitCode(err) != 2 || stdout != "" || !strings.Contains(stderr, "--out FILE writes it to a file") {
		t.Fatalf("-json FILE: exit %d, stdout %q, stderr %q", exitCode(err), stdout, stderr)
	}
}

func TestSweepWritesTableCSVAndChart(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := edabench(t, append([]string{"sweep", "-counts", "1,4", "-out", dir}, quick(dir)...)...)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	checkLegend(t, stdout)
	// Every count passed: that is not a limit, and the result says so.
	if !strings.Contains(flat(stdout), "Result: every count tried met the SLA, up to 4 instances") ||
		!strings.Contains(flat(stdout), "The limit was not reached") {
		t.Fatalf("no result:\n%s", stdout)
	}
	f, err := os.Open(filepath.Join(dir, "sweep.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 3 || rows[1][0] != "1" || rows[2][0] != "4" {
		t.Fatalf("CSV: %v %v", rows, err)
	}
	img, err := os.Open(filepath.Join(dir, "sweep.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if cfg, err := png.DecodeConfig(img); err != nil || cfg.Width < 200 {
		t.Fatalf("chart: %v %+v", err, cfg)
	}
}

// flat joins wrapped lines, so that a test can look for a sentence.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkLegend checks that a table is followed by a legend explaining
// each of its columns and verdicts, and that it prints one summary.
func checkLegend(t *testing.T, out string) {
	t.Helper()
	for _, col := range []string{"instances", "messages", "latency", "CPU %", "runs ok", "SLA"} {
		if !strings.Contains(out, "\n  "+col+" ") {
			t.Errorf("legend does not explain %q:\n%s", col, out)
		}
	}
	for _, mark := range []string{"meets:", "fails:", "lost:", "- :", "corrected:", "uncorrected:"} {
		if !strings.Contains(out, mark) {
			t.Errorf("legend does not explain %q:\n%s", mark, out)
		}
	}
	if n := strings.Count(out, "Result:"); n != 1 {
		t.Errorf("%d summaries, want 1:\n%s", n, out)
	}
}

// TestSweepTimeLimit: a sweep stopped by -time-limit says so, prints
// what it measured, and reports no limit it did not find.
func TestSweepTimeLimit(t *testing.T) {
	dir := t.TempDir()
	// A setting takes 1.1 s and more: the first fits in 2.2 s, the second
	// cannot start before 1.1 s and would end after 2.2 s.
	stdout, stderr, err := edabench(t, append([]string{"sweep", "-counts", "1,2,3", "-time-limit", "2.2s", "-out", dir}, quick(dir)...)...)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	checkLegend(t, stdout)
	for _, want := range []string{"Result: cut short by -time-limit 2.2s: 2 instances would not have finished within it.",
		"1 instance, the largest count that met the SLA", "is not a limit found: the limit is 1 or more."} {
		if !strings.Contains(flat(stdout), want) {
			t.Errorf("missing %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "limit lies") || strings.Contains(stdout, "        2 ") {
		t.Errorf("reports a setting or a limit it did not measure:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep.csv")); err != nil {
		t.Errorf("no CSV for the settings measured: %v", err)
	}

	// A limit shorter than the first setting: nothing runs, and it says so.
	stdout, stderr, err = edabench(t, append([]string{"sweep", "-counts", "1,2", "-time-limit", "500ms", "-out", dir}, quick(dir)...)...)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(flat(stdout), "Result: cut short by -time-limit 500ms: 1 instance would not have finished within it. No count met the SLA") {
		t.Errorf("no cut-short result:\n%s", stdout)
	}
}

// TestChartCommand draws the checked-in data file into a directory of
// its own.
func TestChartCommand(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := edabench(t, "chart", "-data", filepath.Join("..", "..", defaultData), "-out", dir)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	for _, name := range []string{"eda-p999.png", "eda-cost.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width < 1000 || cfg.Height < 600 {
			t.Errorf("%s: %v %+v", name, err, cfg)
		}
	}
	if !strings.Contains(stdout, "Chronicle Queue (Chronicle EDA article)") || !strings.Contains(stdout, "Wrote ") {
		t.Errorf("no cost table:\n%s", stdout)
	}
	if _, _, err := edabench(t, "chart", "-data", filepath.Join("..", "..", defaultData), "-out", dir, "-format", "svg"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "eda-p999.svg")); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("SVG: %v", err)
	}
}

// TestProcessPlacementCleansUp runs a process placement and checks that
// no child process outlives it.
func TestProcessPlacementCleansUp(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := edabench(t, append([]string{"run", "-instances", "2", "-placement", "instance"}, quick(dir)...)...)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	if pids := children(t); len(pids) > 0 {
		t.Fatalf("child processes left behind: %v", pids)
	}
}

// children lists running processes of the test binary's edabench.
func children(t *testing.T) []string {
	out, _ := exec.Command("pgrep", "-f", bin+" "+eda.ChildArg).Output()
	return strings.Fields(string(out))
}

// TestDeadChild kills a child process during set-up and during the run:
// edabench must say which child died and exit non-zero, leaving no child
// behind.
func TestDeadChild(t *testing.T) {
	for _, when := range []string{"set-up", "run"} {
		t.Run(when, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(bin, "run", "-v", "-instances", "3", "-placement", "instance",
				"-warmup", "200ms", "-runs", "1", "-run", "60s", "-dir", dir)
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 1000)
			var log strings.Builder
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			if when == "run" {
				// The first progress line comes a second into the run.
				for l := range lines {
					log.WriteString(l + "\n")
					if strings.Contains(l, "messages through the chain") {
						break
					}
				}
			}
			var victim string
			for victim == "" {
				if pids := children(t); len(pids) == 3 {
					victim = pids[1]
				}
			}
			exec.Command("kill", "-9", victim).Run()
			for l := range lines {
				log.WriteString(l + "\n")
			}
			if exitCode(cmd.Wait()) == 0 {
				t.Fatal("edabench succeeded with a dead child")
			}
			if !strings.Contains(log.String(), "child") || !strings.Contains(log.String(), "exited during the run") {
				t.Fatalf("message does not name the dead child:\n%s", log.String())
			}
			if pids := children(t); len(pids) > 0 {
				t.Fatalf("child processes left behind: %v", pids)
			}
		})
	}
}
