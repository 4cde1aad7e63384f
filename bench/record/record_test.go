package main

import (
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseBench(t *testing.T) {
	out := `goos: linux
pkg: github.com/offmap/offmap/offmap
BenchmarkGet-2                  	 1000000	       204.0 ns/op	       0 B/op	       0 allocs/op
some log line
BenchmarkTwoProcessesGet-16     	 2000000	         1.5 ns/op	         4.38 one-M-gets/s	         1.74 scale
BenchmarkSize                   	       1	         0.5 ns/op	        44.69 MiB
--- FAIL: BenchmarkEvictOffGet
BenchmarkBroken-2 --- FAIL
PASS
`
	ms, err := parseBench(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []measurement{
		{"Get", "ns/op", 204}, {"Get", "B/op", 0}, {"Get", "allocs/op", 0},
		{"TwoProcessesGet", "ns/op", 1.5}, {"TwoProcessesGet", "one-M-gets/s", 4.38}, {"TwoProcessesGet", "scale", 1.74},
		{"Size", "ns/op", 0.5}, {"Size", "MiB", 44.69},
	}
	if !slices.Equal(ms, want) {
		t.Fatalf("parsed\n%v\nwant\n%v", ms, want)
	}
	if _, err := parseBench("BenchmarkX-2  10  5.0 ns/op 3.0\n"); err == nil {
		t.Fatal("a value without a unit parsed")
	}
	if _, err := parseBench("BenchmarkX-2  10  five ns/op\n"); err == nil {
		t.Fatal("a value that is no number parsed")
	}
}

func TestParseFloor(t *testing.T) {
	out := "corrected    p50 0.36 us  p99 80.0 us  p99.9 1880.0 us  worst 4000.0 us\n" +
		"uncorrected  p50 0.29 us  p99 10.0 us  p99.9 1353.3 us  worst 3287.2 us\n"
	ms, err := parseFloor(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 8 || ms[0] != (measurement{"corrected", "p50-us", 0.36}) || ms[6] != (measurement{"uncorrected", "p99.9-us", 1353.3}) {
		t.Fatalf("parsed %v", ms)
	}
	if _, err := parseFloor(out[:strings.Index(out, "\n")+1]); err == nil {
		t.Fatal("a report with one line parsed")
	}
	if _, err := parseFloor(strings.Replace(out, "80.0 us", "80.0 ms", 1)); err == nil {
		t.Fatal("a figure in ms parsed as us")
	}
}

func TestParsePages(t *testing.T) {
	out := "rested 9.38 us\nagain 4.23 us\nrested 7.50 us\nagain 3.68 us\n"
	ms, err := parsePages(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 || ms[0] != (measurement{"rested", "us-a-page", 9.38}) || ms[3] != (measurement{"again", "us-a-page", 3.68}) {
		t.Fatalf("parsed %v", ms)
	}
	if _, err := parsePages("madvise(MADV_POPULATE_WRITE): Invalid argument\n"); err == nil {
		t.Fatal("a report with no figures parsed")
	}
	if _, err := parsePages("rested 9.38 ms\n"); err == nil {
		t.Fatal("a figure in ms parsed as us")
	}
}

func TestMeminfo(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	total, ok := meminfoKiB("MemTotal")
	avail, ok2 := meminfoKiB("MemAvailable")
	if !ok || !ok2 || total <= 0 || avail <= 0 || avail > total {
		t.Fatalf("MemTotal %v (%v), MemAvailable %v (%v)", total, ok, avail, ok2)
	}
	if _, ok := meminfoKiB("NoSuchFigure"); ok {
		t.Fatal("a figure /proc/meminfo does not have was found")
	}
}

const sweepCSV = `instances,wait,placement,messages,p50_ms,p99_ms,p99_9_ms,worst_ms,cpu_percent,meets_sla,runs,runs_meeting_sla
1,loop,process,15000,0.088,0.204,6.783,16.843,5.3,true,0,0
500,loop,process,150000,1.39,28.7,46.7,90,158.0,true,3,3
750,loop,process,150000,24.8,498,629.6,900,192.1,true,3,2
1000,loop,process,150000,240,900,1200,1900,199.1,false,3,0
`

func TestParseSweepCSV(t *testing.T) {
	cs, err := parseSweepCSV(strings.NewReader(sweepCSV))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 4 || cs[1] != (SweepCount{Instances: 500, P50: 1.39, P99: 28.7, P999: 46.7, CPU: 158, Meets: true, Runs: 3, RunsMeeting: 3}) {
		t.Fatalf("parsed %+v", cs)
	}
	s := &Sweep{Runs: 3, Counts: cs}
	// 750 met the verdict (its median run) but not in every run.
	if all, verdict := s.Largest(); all != 500 || verdict != 750 {
		t.Fatalf("Largest = %d, %d; want 500, 750", all, verdict)
	}
	if _, err := parseSweepCSV(strings.NewReader(strings.Replace(sweepCSV, "runs_meeting_sla", "x", 1))); err == nil {
		t.Fatal("a CSV without runs_meeting_sla parsed")
	}
	if _, err := parseSweepCSV(strings.NewReader(strings.Replace(sweepCSV, "158.0", "lots", 1))); err == nil {
		t.Fatal("a row with a bad number parsed")
	}
}

// Ratios are taken within each repetition, not between medians.
func TestRatiosWithinRepetition(t *testing.T) {
	r := &runner{rec: &Record{}}
	units := map[string]string{"offmap/HandleAdd/ns/op": "ns/op", "offmap/AtomicAddMapped/ns/op": "ns/op"}
	for _, v := range [][2]float64{{10, 5}, {6, 6}, {30, 10}, {8, 2}} {
		r.commit(repetition{"offmap/HandleAdd/ns/op": v[0], "offmap/AtomicAddMapped/ns/op": v[1]}, units)
	}
	f := r.rec.Figure("ratio/HandleAdd over AtomicAddMapped")
	if f == nil || !slices.Equal(f.Values, []float64{2, 1, 3, 4}) {
		t.Fatalf("ratio figure %+v", f)
	}
	if f.Min != 1 || f.Max != 4 || f.Median != 2.5 {
		t.Fatalf("spread %v %v %v, want 1, 2.5, 4", f.Min, f.Median, f.Max)
	}
	// The medians' ratio would say 9/5.5.
	if a := r.rec.Figure("offmap/HandleAdd/ns/op"); a.Median != 9 || a.Unit != "ns/op" {
		t.Fatalf("HandleAdd %+v", a)
	}
}

func TestReplaceBlock(t *testing.T) {
	doc := "intro\n" + beginMarker("glance") + "\nold\n" + endMarker("glance") + "\nend\n"
	got, err := replaceBlock(doc, "glance", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + beginMarker("glance") + "\nnew\n" + endMarker("glance") + "\nend\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if c, ok := block(got, "glance"); !ok || c != "new\n" {
		t.Fatalf("block = %q, %v", c, ok)
	}
	for _, bad := range []string{"no markers", doc + doc, endMarker("glance") + beginMarker("glance")} {
		if _, err := replaceBlock(bad, "glance", "x"); err == nil {
			t.Errorf("replaced in %q", bad)
		}
	}
}

func testRecord() *Record {
	r := &Record{Version: recordVersion, Start: time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 3, 19, 35, 0, 0, time.UTC),
		Reps: 2, Commit: "abc1234", Machine: Machine{CPU: "AMD EPYC", CPUs: 2, MemoryGiB: 23.5, OS: "linux", Kernel: "6.18", Go: "go1.26.8"}}
	run := &runner{rec: r}
	units := map[string]string{}
	for _, v := range []float64{1, 1.1} {
		run.commit(repetition{
			"offmap/Get/ns/op": 150 * v, "offmap/GoMapRWMutexGet/ns/op": 180, // met
			"offmap/HandleAdd/ns/op": 30 * v, "offmap/AtomicAddMapped/ns/op": 6, // not met: 5x
			"offmap/FileSizeGrown/grown-MiB": 3.65, "offmap/FileSizeGrown/sized-MiB": 2.38, "offmap/FileSizeGrown/ratio": 1.53,
			"queue/CrossProcessWake/uncorrected-p50-us": 60 * v, "queue/CrossProcessWakeThread/uncorrected-p50-us": 55 * v, "cwake-split/uncorrected/p50-us": 50, "cwake/uncorrected/p50-us": 11, // not met
		}, units)
	}
	for i, v := range []float64{9, 9.5, 10} {
		r.add("pages/rested/us-a-page", "us-a-page", v)
		r.add("pages/again/us-a-page", "us-a-page", 4+0.2*float64(i))
	}
	cs, _ := parseSweepCSV(strings.NewReader(sweepCSV))
	r.Sweeps = []*Sweep{{Name: "loop", Wait: "loop", Dir: "eda-loop", Runs: 3, Run: "15s", Tmpfs: true, Verdict: "median", Counts: cs, Placement: "cpu", NoServiceProbes: true},
		{Name: "park", Wait: "park", Placement: "cpu", Dir: "eda-park", Runs: 3, Run: "15s", Tmpfs: true, Verdict: "median", Counts: cs}}
	return r
}

func TestRenderGlance(t *testing.T) {
	g := renderGlance(testRecord(), "results/x/README.md")
	for _, want := range []string{
		"| map Get no slower than a Go map + RWMutex, 1M entries | Get 158 ns against Go map 180 ns: 0.875x (0.833-0.917) | met |",
		"| handle Add within 2x of a bare atomic add on mapped memory | Add 31.5 ns against atomic add 6.00 ns: 5.25x (5.00-5.50) | not met: 5.25x |",
		"3.65 MiB against 2.38 MiB: 1.53x | not met: 1.53x |",
		"| queue: 16-byte append under 100 ns | not in this record | - |",
		"| Block 63.0 us (60.0-66.0); BlockThread 57.8 us (55.0-60.5); a C program's FUTEX_WAKE, no Go and no queue: 50.0 us across CPUs (Block 1.26x (1.20-1.32), BlockThread 1.16x (1.10-1.21)), 11.0 us where the kernel placed it | not met: 57.8 us with BlockThread |",
		"| 500 in 3 of 3 runs, a process per CPU (p99.9 46.7 ms, 158 % CPU); 750: 2 of 3 (p99.9 630 ms); a fresh tmpfs page costs 9.50 us (4.20 us just freed) | not met: 500 |",
		"park loop: at least 200 instances (issue 29) | 500 in 3 of 3 runs, a process per CPU (p99.9 46.7 ms, 158 % CPU); 750: 2 of 3 (p99.9 630 ms) | met |",
		"[x](results/x/README.md), made by `go run ./bench/record` on 2026-12-03 (19:00-19:35 UTC) at commit abc1234",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("the glance table lacks %q:\n%s", want, g)
		}
	}
	q := testRecord()
	q.Quick = true
	if g := renderGlance(q, "x/README.md"); !strings.Contains(g, "a quick record (one run of 5 s a count) does not judge it") || !strings.Contains(g, "-quick") {
		t.Errorf("a quick record's sweep is judged:\n%s", g)
	}
	readme := renderReadme(testRecord(), "docs/results/x/README.md")
	for _, want := range []string{"| 500 | 1.39 | 28.7 | 46.7 | 158 | 3 of 3 | meets |", "every run was 500, on 2 cores", "(docs/results/x/eda-loop/sweep.png)",
		"queues on tmpfs, a process per CPU bound to its CPU, timed end to end only, judged by the median run"} {
		if !strings.Contains(readme, want) {
			t.Errorf("the README's results lack %q:\n%s", want, readme)
		}
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{1234.5: "1234", 45.67: "45.7", 1.234: "1.23", 0.4567: "0.457", math.NaN(): "-"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// The README's results and BENCHMARKS.md's table are what the latest
// record renders: a record written without regenerating them, or a hand
// edit inside a block, fails here.
func TestDocsAgreeWithLatestRecord(t *testing.T) {
	root := repoRoot(t)
	dir, err := latestRecord(filepath.Join(root, "docs", "results"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := loadRecord(filepath.Join(dir, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docTargets(root, dir) {
		b, err := os.ReadFile(d.file)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := block(string(b), d.block)
		if !ok {
			t.Fatalf("%s has no %s block", d.file, d.block)
		}
		if want := d.render(rec); got != want {
			t.Errorf("%s's %s block differs from what %s renders (go run ./bench/record -render):\n--- has\n%s\n--- renders\n%s", d.file, d.block, dir, got, want)
		}
	}
}

// The command end to end: one step into a fresh directory, then the docs
// of a scratch repository rendered from it.
func TestRecordEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a benchmark")
	}
	root := repoRoot(t)
	out := t.TempDir()
	var log strings.Builder
	if err := run([]string{"-root", root, "-out", out, "-steps", "serial", "-reps", "2", "-quick", "-docs=false"}, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	dir, err := latestRecord(out)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := loadRecord(filepath.Join(dir, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	if f := rec.Figure("serial/TrivialRead/ns/op"); f == nil || len(f.Values) != 2 || f.Min <= 0 || f.Min > f.Median || f.Median > f.Max {
		t.Fatalf("TrivialRead: %+v", f)
	}
	if len(rec.Steps) != 1 || rec.Steps[0].Error != "" || len(rec.Steps[0].Commands) != 2 ||
		!strings.HasPrefix(rec.Steps[0].Commands[0], "go test -c -o $BIN/bench_serial.test ./bench/serial") ||
		!strings.HasPrefix(rec.Steps[0].Commands[1], "cd bench/serial && $BIN/bench_serial.test -test.run '^$' -test.bench . -test.benchtime 100ms") {
		t.Fatalf("steps %+v", rec.Steps)
	}
	if !rec.Quick || rec.Reps != 2 || rec.Machine.CPUs < 1 || rec.Commit == "" || rec.Machine.Go == "" {
		t.Fatalf("record %+v", rec)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "serial.txt"))
	if err != nil || strings.Count(string(raw), "BenchmarkTrivialRead-") != 2 {
		t.Fatalf("serial.txt: %v\n%s", err, raw)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil || !strings.Contains(string(readme), "| serial/TrivialRead/ns/op | ns/op |") {
		t.Fatalf("README.md: %v\n%s", err, readme)
	}

	// -render into a scratch repository holding the two documents.
	scratch := t.TempDir()
	if err := os.MkdirAll(filepath.Join(scratch, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct{ file, block string }{{"README.md", blockReadme}, {"docs/BENCHMARKS.md", blockGlance}} {
		doc := "before\n" + beginMarker(d.block) + "\nstale\n" + endMarker(d.block) + "\nafter\n"
		if err := os.WriteFile(filepath.Join(scratch, d.file), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run([]string{"-root", scratch, "-out", out, "-render"}, &log); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(scratch, "docs", "BENCHMARKS.md"))
	g, _ := block(string(b), blockGlance)
	rel, _ := filepath.Rel(filepath.Join(scratch, "docs"), filepath.Join(dir, "README.md"))
	if strings.Contains(string(b), "stale") || !strings.Contains(g, "serialization: trivially-copyable read and write under 5 ns") ||
		!strings.Contains(g, "("+filepath.ToSlash(rel)+")") || !strings.HasSuffix(string(b), endMarker(blockGlance)+"\nafter\n") {
		t.Fatalf("BENCHMARKS.md after -render:\n%s", b)
	}
}

func TestChooseSteps(t *testing.T) {
	if s, err := chooseSteps("map,serial"); err != nil || len(s) != 2 || s[0].name != "map" || s[1].name != "serial" {
		t.Fatalf("chooseSteps: %v, %v", s, err)
	}
	if _, err := chooseSteps("map,nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("an unknown step: %v", err)
	}
}

func TestLoadRecordRefusesFutureVersion(t *testing.T) {
	p := filepath.Join(t.TempDir(), "record.json")
	if err := os.WriteFile(p, []byte(`{"version": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRecord(p); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("loadRecord: %v", err)
	}
}

// TestProfile takes a CPU profile of a busy function in this test binary
// and has the record keep its top, as the profiles step does, then
// renders it into the record's README.
func TestProfile(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.pprof")
	f, err := os.Create(prof)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		profiledSink += spinForProfile(1 << 16)
	}
	pprof.StopCPUProfile()
	f.Close()
	r := &runner{root: repoRoot(t), dir: dir, rec: &Record{}, log: io.Discard, names: strings.NewReplacer()}
	st := &Step{Name: "profiles", Output: "profiles.txt"}
	if err := r.profile(st, "spin", "a busy loop", bin, prof, "spinForProfile"); err != nil {
		t.Fatal(err)
	}
	if len(r.rec.Profiles) != 1 {
		t.Fatalf("profiles: %+v", r.rec.Profiles)
	}
	top := r.rec.Profiles[0].Top
	if !strings.Contains(top, "spinForProfile") || !strings.Contains(top, "flat%") || strings.Contains(top, "Build ID:") {
		t.Fatalf("top:\n%s", top)
	}
	readme := renderRecordReadme(r.rec)
	if !strings.Contains(readme, "## Where the time goes") || !strings.Contains(readme, "### spin\n\na busy loop.") || !strings.Contains(readme, top) {
		t.Fatalf("README:\n%s", readme)
	}
	if len(st.Commands) != 1 || !strings.HasPrefix(st.Commands[0], "go tool pprof -top -nodecount 20 -focus spinForProfile ") {
		t.Fatalf("commands: %q", st.Commands)
	}
}

var profiledSink uint64

//go:noinline
func spinForProfile(n int) uint64 {
	x := uint64(n)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// TestExecNamesDirectories: a step's output file names the record's
// directory as $RECORD, in what the command printed as in its line, so a
// record reads the same wherever it was made; exec still returns what
// the command printed.
func TestExecNamesDirectories(t *testing.T) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo here")
	}
	dir := t.TempDir()
	r := &runner{root: repoRoot(t), dir: dir, rec: &Record{}, log: io.Discard, names: strings.NewReplacer(dir, "$RECORD")}
	st := &Step{Name: "echo", Output: "echo.txt"}
	printed := "Wrote " + filepath.Join(dir, "sweep.json")
	out, err := r.exec(st, r.root, nil, echo, printed)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != printed {
		t.Fatalf("exec returned %q, want %q", out, printed)
	}
	b, err := os.ReadFile(filepath.Join(dir, "echo.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); strings.Contains(got, dir) || !strings.Contains(got, "\nWrote "+filepath.Join("$RECORD", "sweep.json")+"\n") {
		t.Fatalf("output file:\n%s", got)
	}
}
