package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// runner runs the suite's steps and collects what they measure.
type runner struct {
	root  string // the repository
	dir   string // the record's directory
	bin   string // where the built binaries go (not kept)
	shm   string // a directory on tmpfs for the EDA chain's queues, or ""
	quick bool
	reps  int
	rec   *Record
	log   io.Writer
	built map[string]string
	names *strings.Replacer // shows the binaries', the record's and tmpfs's directories by name
}

// stepDef is one step of the suite.
type stepDef struct {
	name string
	what string // for -help and the record's README
	run  func(r *runner, st *Step) error
}

// suite is the headline suite, in the order it runs. Steps whose figures
// are compared as ratios run their A and B in the same process or the
// same repetition, alternating, so that the machine's drift moves both.
var suite = []stepDef{
	{"map", "map Get, GetMany, Put, Update against a Go map + RWMutex; handle Add against a bare atomic add; evicting Get and Put; file sizes", mapStep},
	{"processes", "two reader processes against one; two processes adding to shared counters", processesStep},
	{"queue", "queue append; a blocked reader woken by another process (Block and BlockThread), and the same in C (bench/cfloor/wake.c); 1,000 idle blocked tailers", queueStep},
	{"latency", "one-way latency between two processes, spinning reader: offmap's queue, the same in Go without a queue, and in C (bench/cfloor)", latencyStep},
	{"latency-trace", "the spinning reader at 100,000 msg/s once more, under bench/schedgaps: who had the CPU when its tail was made (needs root)", latencyTraceStep},
	{"serial", "the Chronicle serialization article's benchmark", serialStep},
	{"pages", "what a fresh page of a tmpfs file costs (bench/cfloor/pages.c), which the queue's pretoucher pays for every 4 KiB of new messages", pagesStep},
	{"eda-one", "the EDA chain, one instance, sends released every 20 ms: its CPU", func(r *runner, st *Step) error { return r.sweep(st, "one", "loop") }},
	{"eda-loop", "the EDA chain sweep, event loops", func(r *runner, st *Step) error { return r.sweep(st, "loop", "loop") }},
	{"eda-park", "the EDA chain sweep, the Chronicle EDA article's poll-and-park loop", func(r *runner, st *Step) error { return r.sweep(st, "park", "park") }},
	{"profiles", "CPU profiles of targets that fall short: Get and GetMany on 1M keys; the EDA chain in one process at the first count each sweep failed", profilesStep},
}

// ratios are the comparisons the record computes within each repetition:
// name, then the figure divided by the other.
var ratios = []struct{ name, num, den string }{
	{"ratio/Get over GoMapRWMutexGet", "offmap/Get/ns/op", "offmap/GoMapRWMutexGet/ns/op"},
	{"ratio/GetGrown over Get", "offmap/GetGrown/ns/op", "offmap/Get/ns/op"},
	{"ratio/Get over GetMany", "offmap/Get/ns/op", "offmap/GetMany/ns/op"},
	{"ratio/GoMapRWMutexGet over GetMany", "offmap/GoMapRWMutexGet/ns/op", "offmap/GetMany/ns/op"},
	{"ratio/PutUpdate over GoMapRWMutexUpdate", "offmap/PutUpdate/ns/op", "offmap/GoMapRWMutexUpdate/ns/op"},
	{"ratio/UpdateIncrement over GoMapRWMutexUpdate", "offmap/UpdateIncrement/ns/op", "offmap/GoMapRWMutexUpdate/ns/op"},
	{"ratio/HandleAdd over AtomicAddMapped", "offmap/HandleAdd/ns/op", "offmap/AtomicAddMapped/ns/op"},
	{"ratio/EvictOnGet over EvictOffGet", "offmap/EvictOnGet/ns/op", "offmap/EvictOffGet/ns/op"},
	{"ratio/EvictOnPut over EvictOffPut", "offmap/EvictOnPut/ns/op", "offmap/EvictOffPut/ns/op"},
	{"ratio/queue p50 over C floor", "queue/CrossProcessSpin/p50-us", "cfloor/corrected/p50-us"},
	{"ratio/queue p99 over C floor", "queue/CrossProcessSpin/p99-us", "cfloor/corrected/p99-us"},
	{"ratio/queue p99.9 over C floor", "queue/CrossProcessSpin/p99.9-us", "cfloor/corrected/p99.9-us"},
	{"ratio/queue back to back p50 over C floor", "queue/CrossProcessSpinFull/uncorrected-p50-us", "cfloor-full/uncorrected/p50-us"},
	{"ratio/queue back to back p99 over C floor", "queue/CrossProcessSpinFull/uncorrected-p99-us", "cfloor-full/uncorrected/p99-us"},
	{"ratio/queue uncorrected p50 over C floor", "queue/CrossProcessSpin/uncorrected-p50-us", "cfloor/uncorrected/p50-us"},
	{"ratio/queue uncorrected p99 over C floor", "queue/CrossProcessSpin/uncorrected-p99-us", "cfloor/uncorrected/p99-us"},
	{"ratio/queue wake-up over C across CPUs", "queue/CrossProcessWake/uncorrected-p50-us", "cwake-split/uncorrected/p50-us"},
	{"ratio/queue BlockThread wake-up over C across CPUs", "queue/CrossProcessWakeThread/uncorrected-p50-us", "cwake-split/uncorrected/p50-us"},
}

// repetition collects one repetition's figures, then adds them and the
// ratios they allow to the record.
type repetition map[string]float64

func (r *runner) commit(rep repetition, units map[string]string) {
	for name, v := range rep {
		r.rec.add(name, units[name], v)
	}
	for _, q := range ratios {
		n, okN := rep[q.num]
		d, okD := rep[q.den]
		if okN && okD && d != 0 {
			r.rec.add(q.name, "x", n/d)
		}
	}
}

// build compiles a package's test binary (test) or a command once.
func (r *runner) build(st *Step, pkg string, test bool) (string, error) {
	key := fmt.Sprint(pkg, test)
	if p, ok := r.built[key]; ok {
		return p, nil
	}
	out := filepath.Join(r.bin, strings.ReplaceAll(strings.TrimPrefix(pkg, "./"), "/", "_")+map[bool]string{true: ".test", false: ""}[test])
	args := []string{"build", "-o", out, pkg}
	if test {
		args = []string{"test", "-c", "-o", out, pkg}
	}
	if _, err := r.exec(st, r.root, nil, "go", args...); err != nil {
		return "", err
	}
	r.built[key] = out
	return out, nil
}

// exec runs a command in dir, records it in the step, and appends what
// it printed to the step's output file; it returns what the command
// printed, the directories unnamed.
func (r *runner) exec(st *Step, dir string, env []string, name string, args ...string) (string, error) {
	line := r.names.Replace(shellLine(name, args))
	if rel, err := filepath.Rel(r.root, dir); err == nil && rel != "." {
		line = "cd " + rel + " && " + line
	}
	if !contains(st.Commands, line) {
		st.Commands = append(st.Commands, line)
	}
	fmt.Fprintf(r.log, "record: %s: %s\n", st.Name, line)
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	f, ferr := os.OpenFile(filepath.Join(r.dir, st.Output), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if ferr == nil {
		// What the command printed names the directories as its line does.
		fmt.Fprintf(f, "$ %s   # %s, load %v\n%s\n", line, time.Now().UTC().Format("15:04:05"), loadAverage(), r.names.Replace(out.String()))
		ferr = f.Close()
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s: %v\n%s", line, err, tail(out.String(), 2000))
	}
	return out.String(), ferr
}

// benchReps runs a test binary's benchmarks once per repetition, adding
// each result as "prefix/Name/unit", plus any extra figures a repetition
// adds before it is committed.
func (r *runner) benchReps(st *Step, pkg, prefix, pattern, benchtime string, extra func(rep repetition, units map[string]string) error) error {
	bin, err := r.build(st, "./"+pkg, true)
	if err != nil {
		return err
	}
	for range r.reps {
		rep, units := repetition{}, map[string]string{}
		if extra != nil {
			if err := extra(rep, units); err != nil {
				return err
			}
		}
		out, err := r.exec(st, filepath.Join(r.root, pkg), nil, bin, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime)
		if err != nil {
			return err
		}
		ms, err := parseBench(out)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return fmt.Errorf("%s: no benchmark results in:\n%s", pkg, tail(out, 2000))
		}
		for _, m := range ms {
			name := prefix + "/" + m.bench + "/" + m.unit
			rep[name], units[name] = m.value, m.unit
		}
		r.commit(rep, units)
	}
	return nil
}

func mapStep(r *runner, st *Step) error {
	return r.benchReps(st, "offmap", "offmap",
		"^Benchmark(Get|GetGrown|GetMany|GoMapRWMutexGet|PutUpdate|UpdateIncrement|GoMapRWMutexUpdate|HandleAdd|AtomicAddMapped|FileSize|FileSizeGrown|Evict(Off|On)(Get|Put))$",
		r.pick("2000000x", "1000000x"), nil)
}

func processesStep(r *runner, st *Step) error {
	return r.benchReps(st, "offmap", "offmap", "^Benchmark(TwoProcessesGet|TwoProcessesHandleAdd|TwoProcessesUpdate)$", r.pick("4000000x", "2000000x"), nil)
}

func queueStep(r *runner, st *Step) error {
	if err := r.benchReps(st, "queue", "queue", "^BenchmarkAppend16$", r.pick("2000000x", "1000000x"), nil); err != nil {
		return err
	}
	// A few repetitions of the slow ones are enough for their medians.
	reps := r.reps
	r.reps = min(reps, 3)
	defer func() { r.reps = reps }()
	floor := filepath.Join(r.bin, "wakefloor")
	if _, err := r.exec(st, r.root, nil, "gcc", "-O2", "-o", floor, "bench/cfloor/wake.c"); err != nil {
		return fmt.Errorf("the C floor needs gcc: %w", err)
	}
	// The wake-up's floor in C in each repetition: placed by the kernel,
	// and with the two processes on different CPUs.
	return r.benchReps(st, "queue", "queue", "^Benchmark(CrossProcessWake|CrossProcessWakeThread|IdleBlockedTailers)$", "2000x",
		func(rep repetition, units map[string]string) error {
			return r.floorFigures(st, rep, units, floor, map[string]string{"": "cwake/", "split": "cwake-split/"})
		})
}

// floorFigures runs the C floor program once per mode ("" for none) and
// records its figures under the mode's prefix.
func (r *runner) floorFigures(st *Step, rep repetition, units map[string]string, floor string, prefixes map[string]string) error {
	for _, mode := range slices.Sorted(maps.Keys(prefixes)) {
		var args []string
		if mode != "" {
			args = []string{mode}
		}
		out, err := r.exec(st, r.root, nil, floor, args...)
		if err != nil {
			return err
		}
		ms, err := parseFloor(out)
		if err != nil {
			return err
		}
		for _, m := range ms {
			name := prefixes[mode] + m.bench + "/" + m.unit
			rep[name], units[name] = m.value, m.unit
		}
	}
	return nil
}

// latencyStep runs the C floor, then the queue's and Go's floor, in each
// repetition, so their ratio is taken within one stretch of the machine.
func latencyStep(r *runner, st *Step) error {
	floor := filepath.Join(r.bin, "spinfloor")
	if _, err := r.exec(st, r.root, nil, "gcc", "-O2", "-o", floor, "bench/cfloor/spin.c"); err != nil {
		return fmt.Errorf("the C floor needs gcc: %w", err)
	}
	return r.benchReps(st, "queue", "queue", "^BenchmarkCrossProcessSpin(Full)?(Floor)?$", r.pick("500000x", "200000x"),
		func(rep repetition, units map[string]string) error {
			return r.floorFigures(st, rep, units, floor, map[string]string{"": "cfloor/", "full": "cfloor-full/"})
		})
}

// errSkipped marks a step that could not run here, for a reason that is
// the machine's (no root): the record says so and the command succeeds.
var errSkipped = errors.New("skipped")

// latencyTraceStep runs the spinning reader's benchmark once under the
// scheduler trace, which names who took the CPU for each stall of 1 ms or
// more; its figures are recorded apart ("queue-traced/..."), since the
// trace itself costs a little.
func latencyTraceStep(r *runner, st *Step) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the scheduler trace needs root", errSkipped)
	}
	gaps, err := r.build(st, "./bench/schedgaps", false)
	if err != nil {
		return err
	}
	bin, err := r.build(st, "./queue", true)
	if err != nil {
		return err
	}
	out, err := r.exec(st, filepath.Join(r.root, "queue"), nil, gaps, "-threads", "-min", "1ms", "--",
		bin, "-test.run", "^$", "-test.bench", "^BenchmarkCrossProcessSpin$", "-test.benchtime", r.pick("500000x", "200000x"))
	if err != nil {
		return err
	}
	ms, err := parseBench(out)
	if err != nil {
		return err
	}
	rep, units := repetition{}, map[string]string{}
	for _, m := range ms {
		name := "queue-traced/" + m.bench + "/" + m.unit
		rep[name], units[name] = m.value, m.unit
	}
	if len(rep) == 0 {
		return fmt.Errorf("no benchmark result under the trace:\n%s", tail(out, 2000))
	}
	r.commit(rep, units)
	return nil
}

// pagesStep measures the page cost the EDA chain's queues meet on tmpfs:
// at 1,000 instances they write 47,000 new pages a second. The program
// rests 10 s before each of its rounds, so it takes about 80 s; a quick
// record leaves it out.
func pagesStep(r *runner, st *Step) error {
	switch {
	case r.quick:
		return fmt.Errorf("%w: a quick record leaves it out", errSkipped)
	case r.shm == "":
		return fmt.Errorf("%w: no tmpfs at /dev/shm", errSkipped)
	}
	// The program faults in 4 GiB: leave room for everything else.
	if kib, ok := meminfoKiB("MemAvailable"); !ok || kib < 8<<20 {
		return fmt.Errorf("%w: it needs 8 GiB of memory available", errSkipped)
	}
	floor := filepath.Join(r.bin, "pagefloor")
	if _, err := r.exec(st, r.root, nil, "gcc", "-O2", "-o", floor, "bench/cfloor/pages.c"); err != nil {
		return fmt.Errorf("the page floor needs gcc: %w", err)
	}
	out, err := r.exec(st, r.root, nil, floor, r.shm)
	if err != nil {
		return err
	}
	ms, err := parsePages(out)
	if err != nil {
		return err
	}
	for _, m := range ms {
		r.rec.add("pages/"+m.bench+"/"+m.unit, m.unit, m.value)
	}
	return nil
}

func serialStep(r *runner, st *Step) error {
	return r.benchReps(st, "bench/serial", "serial", ".", r.pick("300ms", "100ms"), nil)
}

// sweep runs edabench's sweep in one wait mode into the record's
// directory. The full record runs three runs of 15 s per count, as the
// targets ask; -quick one run of 5 s over fewer counts. The sweep named
// "one" is one instance alone, with its sends released every 20 ms.
func (r *runner) sweep(st *Step, name, wait string) error {
	bin, err := r.build(st, "./cmd/edabench", false)
	if err != nil {
		return err
	}
	out := filepath.Join(r.dir, "eda-"+name)
	queues, err := os.MkdirTemp(r.shm, "record-eda-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(queues)
	runs, verdict := 3, "median"
	args := []string{"sweep", "--wait", wait, "--dir", queues, "--out", out}
	// The sweeps run a process per CPU, each with one P and bound to its
	// CPU: the park loop's goroutines then pay Go's timers and scheduler
	// the least for their naps, and event loops keep each instance's
	// queues in one core's caches. They time messages end to end, as the
	// Chronicle EDA article did, without the per-service probes
	// (docs/BENCHMARKS.md, "A process per CPU").
	placement, endToEnd := "", name != "one"
	if endToEnd {
		placement = "cpu"
		args = append(args, "--placement", placement, "--service-probes=false")
	}
	length := "15s"
	switch {
	case name == "one":
		length = r.pick("5s", "3s")
		args = append(args, "--counts", "1", "--batch", "20ms")
	case r.quick:
		runs, verdict, length = 1, "all", "5s"
		args = append(args, "--warmup", "2s", "--counts", map[string]string{
			"loop": "1,100,250,500,750,1000,1500",
			"park": "1,50,100,150,200,250,300",
		}[wait])
	default:
		args = append(args, "--time-limit", "30m")
	}
	if name != "one" {
		// The targets ask how many instances meet the SLA: a sweep ends
		// at the first count that fails it, not where the CPU is busy
		// (recorded with each count).
		args = append(args, "--saturation", "101")
	}
	args = append(args, "--run", length)
	args = append(args, "--runs", fmt.Sprint(runs), "--verdict", verdict)
	if _, err := r.exec(st, r.root, nil, bin, args...); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(out, "sweep.csv"))
	if err != nil {
		return err
	}
	defer f.Close()
	counts, err := parseSweepCSV(f)
	if err != nil {
		return err
	}
	if len(counts) == 0 {
		return errors.New("the sweep tried no count")
	}
	r.rec.Sweeps = append(r.rec.Sweeps, &Sweep{Name: name, Wait: wait, Placement: placement, NoServiceProbes: endToEnd, Dir: "eda-" + name, Runs: runs, Run: length, Verdict: verdict, Tmpfs: r.shm != "", Counts: counts})
	return nil
}

// pick returns the full record's setting or the quick one's.
func (r *runner) pick(full, quick string) string {
	if r.quick {
		return quick
	}
	return full
}

// shellLine quotes a command as a shell would need it, with paths to the
// binaries this command built shown by their base names.
func shellLine(name string, args []string) string {
	parts := []string{quote(name)}
	for _, a := range args {
		parts = append(parts, quote(a))
	}
	return strings.Join(parts, " ")
}

func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=,:+", c))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// profilesStep profiles the work behind targets that fall short, so that
// the record says where the time goes: Get and GetMany on 1M random keys,
// and the EDA chain in each wait mode at the first count its sweep failed
// (1,000 or 200 instances, the targets, when none failed). The chain runs
// all its instances in this one process: the sweeps' process per CPU
// would leave the work in children the profile does not see.
func profilesStep(r *runner, st *Step) error {
	bin, err := r.build(st, "./offmap", true)
	if err != nil {
		return err
	}
	for _, p := range []struct{ name, bench, focus string }{
		{"Get", "^BenchmarkGet$", `benchGet`},
		{"GetMany", "^BenchmarkGetMany$", `\(\*Map\)\.GetMany$`},
	} {
		prof := filepath.Join(r.bin, "profile-"+p.name+".pprof")
		if _, err := r.exec(st, filepath.Join(r.root, "offmap"), nil, bin, "-test.run", "^$", "-test.bench", p.bench,
			"-test.benchtime", r.pick("3s", "1s"), "-test.cpuprofile", prof); err != nil {
			return err
		}
		what := fmt.Sprintf("map %s on 1M random keys (Benchmark%s), the samples under it", p.name, p.name)
		if err := r.profile(st, "map-"+p.name, what, bin, prof, p.focus); err != nil {
			return err
		}
	}
	eda, err := r.build(st, "./cmd/edabench", false)
	if err != nil {
		return err
	}
	for _, w := range []struct {
		wait string
		n    int
	}{{"loop", 1000}, {"park", 200}} {
		n := w.n
		if s := r.rec.Sweep(w.wait); s != nil {
			all, _ := s.Largest()
			if next, ok := s.next(all); ok {
				n = next.Instances
			}
		}
		queues, err := os.MkdirTemp(r.shm, "record-profile-")
		if err != nil {
			return err
		}
		prof := filepath.Join(r.bin, "profile-eda-"+w.wait+".pprof")
		_, err = r.exec(st, r.root, nil, eda, "run", "--wait", w.wait, "--instances", fmt.Sprint(n), "--runs", "1",
			"--warmup", "3s", "--run", r.pick("10s", "5s"), "--service-probes=false", "--dir", queues, "--cpuprofile", prof)
		os.RemoveAll(queues)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("the EDA chain, wait %s, %d instances in one process", w.wait, n)
		if err := r.profile(st, "eda-"+w.wait, what, eda, prof, ""); err != nil {
			return err
		}
	}
	return nil
}

// profile adds to the record the top of a CPU profile: the functions that
// took the most samples, and their callees (focus, if set, keeps only the
// samples with a matching function on their stack).
func (r *runner) profile(st *Step, name, what, bin, prof, focus string) error {
	args := []string{"tool", "pprof", "-top", "-nodecount", "20"}
	if focus != "" {
		args = append(args, "-focus", focus)
	}
	out, err := r.exec(st, r.root, nil, "go", append(args, bin, prof)...)
	if err != nil {
		return err
	}
	r.rec.Profiles = append(r.rec.Profiles, &Profile{Name: name, What: what, Top: pprofTop(out)})
	return nil
}

// pprofTop keeps pprof -top's table and the line that sums it up, without
// the lines naming the binary, the build and the time.
func pprofTop(out string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}
