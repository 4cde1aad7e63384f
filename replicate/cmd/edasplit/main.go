// Command edasplit measures the EDA chain (bench/eda) split over two hosts
// bridged through an engine, against the same chain run entirely on the
// engine: for each, the instance counts in turn until p99.9 (corrected for
// coordinated omission) exceeds the SLA, and the largest that kept under it.
//
//	edasplit -instances 1,5,10,20        these counts, for both configurations
//	edasplit -max 50                     1, 2, 5, 10, 15, 20, 30, 40, 50
//	edasplit -max 50 -repeat 3 -o r.md   each count 3 times (the median decides),
//	                                     the report also written to r.md
//	edasplit -configs split,shared,engine -nodes 3
//	                                     also the split through one shared stream;
//	                                     a 3-node cluster, streams R3
//
// The split (package edasplit): services 1-2 on host A, 3-5 on host B, topic
// 2 carried by a mirror (queue on A -> JetStream stream) and an ingest
// (stream -> queue on B); every other topic is an offmap queue. The
// hosts are directories of this machine and the mirrors and ingests
// goroutines of this process, beside an embedded JetStream that each
// measurement starts afresh; the CPU column is all of it.
//
// It prints Markdown: a table per configuration, then the largest count
// that passed for each. Progress goes to standard error.
//
// The machine it was written for is a shared 2-core VM, where other
// processes come and go. So the configurations are measured at each count
// back to back (repeats alternating), every measurement records the load
// average and the CPU other processes used while it ran, -repeat takes the
// median of several, -quiet waits for a quiet moment before each, and -o
// is rewritten after every measurement, so that a sweep cut short leaves
// what it measured.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/edasplit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "edasplit:", err)
		}
		os.Exit(2)
	}
}

// ladder is the sweep's counts: fine where the engine's limits lie (the
// peer comparison found 10 for the chain on NATS), coarser above.
var ladder = []int{1, 2, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 300, 500}

// options are the command's flags.
type options struct {
	counts    []int
	configs   []string
	engine    edasplit.Engine
	wait      eda.WaitMode
	blockSpin time.Duration
	rate      float64
	batch     time.Duration
	warmup    time.Duration
	runs      int
	runLength time.Duration
	grace     time.Duration
	sla       time.Duration
	repeat    int
	quiet     float64
	quietWait time.Duration
	dir       string
	out       string
	all       bool
	verbose   bool
	profile   string
	args      []string // as given, for the report
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("edasplit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{args: args}
	instances := fs.String("instances", "", "instance counts to try, in order (comma-separated); empty: the sweep up to -max")
	maxN := fs.Int("max", 50, "the sweep's largest count, when -instances is empty: "+joinInts(ladder)+" up to it")
	configs := fs.String("configs", "split,engine", "what to run, in order: split (topic 2 of each instance bridged through a stream of its own), shared (topic 2 of every instance through one bridge and stream), engine (all topics on the engine)")
	engine := fs.String("engine", "nats", "the engine: nats (JetStream)")
	fs.IntVar(&o.engine.Nodes, "nodes", 1, "engine nodes: 1, or 3 (a cluster on loopback)")
	fs.IntVar(&o.engine.Replicas, "replicas", 0, "replicas of each stream (0: as many as nodes)")
	wait := fs.String("wait", "park", "how services wait: park (poll, sleep 1/8 of the interval; the Chronicle EDA article's loop) or block (a goroutine per service)")
	fs.DurationVar(&o.blockSpin, "block-spin", 0, "split, block wait: how long a service polls its queue before it sleeps (queue.Options.BlockSpin; 0: the queue's default, 50us; -1ns: never)")
	fs.Float64Var(&o.rate, "rate", 1000, "messages a second per instance")
	fs.DurationVar(&o.batch, "batch", time.Millisecond, "release due sends at most this often (as the peer comparison)")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up, not measured")
	fs.IntVar(&o.runs, "runs", 2, "measured runs per setting")
	fs.DurationVar(&o.runLength, "run", 5*time.Second, "length of a measured run")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "wait this long after the last send for messages in flight; later ones count as lost")
	fs.DurationVar(&o.sla, "sla", 100*time.Millisecond, "p99.9 (corrected) a setting must stay under")
	fs.IntVar(&o.repeat, "repeat", 1, "measure each count this many times; the table shows the median by p99.9, which decides")
	fs.Float64Var(&o.quiet, "quiet", 0, "before each measurement, wait until other processes use less than this % of one core (0: do not wait)")
	fs.DurationVar(&o.quietWait, "quiet-wait", 10*time.Minute, "with -quiet, wait at most this long, then measure anyway")
	fs.StringVar(&o.dir, "dir", os.TempDir(), "directory for the runs' queues and engine stores")
	fs.StringVar(&o.out, "o", "", "also write the report to this file")
	fs.BoolVar(&o.all, "all", false, "try every count, even after one failed the SLA")
	fs.BoolVar(&o.verbose, "v", false, "a progress line a second, on standard error")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the whole command to this file")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: edasplit [flags]\n\nexample: edasplit -max 50 -repeat 3 -o report.md\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (-h lists the flags)", fs.Arg(0))
	}
	if *engine != "nats" {
		return nil, fmt.Errorf("-engine %q: only nats (JetStream) is implemented", *engine)
	}
	var err error
	if *instances != "" {
		if o.counts, err = parseCounts(*instances); err != nil {
			return nil, err
		}
	} else {
		for _, n := range ladder {
			if n <= *maxN {
				o.counts = append(o.counts, n)
			}
		}
		if len(o.counts) == 0 {
			return nil, fmt.Errorf("-max %d: want 1 or more", *maxN)
		}
	}
	for _, c := range strings.Split(*configs, ",") {
		c = strings.TrimSpace(c)
		if c != "split" && c != "shared" && c != "engine" {
			return nil, fmt.Errorf("-configs: unknown %q (want split, shared, engine)", c)
		}
		o.configs = append(o.configs, c)
	}
	switch *wait {
	case "park":
		o.wait = eda.Park
	case "block":
		o.wait = eda.Block
	default:
		return nil, fmt.Errorf("-wait %q: want park or block (eda's event loops need every topic to be an offmap queue)", *wait)
	}
	switch {
	case o.engine.Nodes != 1 && o.engine.Nodes != 3:
		return nil, fmt.Errorf("-nodes %d: want 1 or 3", o.engine.Nodes)
	case o.engine.Replicas < 0 || o.engine.Replicas > o.engine.Nodes:
		return nil, fmt.Errorf("-replicas %d: want 0 to %d", o.engine.Replicas, o.engine.Nodes)
	case o.repeat < 1:
		return nil, fmt.Errorf("-repeat %d: want 1 or more", o.repeat)
	case o.runs < 1 || o.runLength <= 0 || o.warmup < 0 || o.rate <= 0:
		return nil, errors.New("-runs, -run and -rate must be positive, -warmup not negative")
	}
	return o, nil
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-instances: bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("-dir %s: not a directory", o.dir)
	}
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep := &report{opts: o, started: time.Now(), machine: machine()}
	// The report file is rewritten after every measurement, so that a run
	// cut short (a shared machine, a long sweep) leaves what it measured.
	save := func(sw []sweepResult) {
		if o.out == "" {
			return
		}
		partial := *rep
		partial.sweeps = sw
		var b strings.Builder
		partial.write(&b)
		b.WriteString("\n(in progress)\n")
		if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(stderr, "edasplit:", err)
		}
	}
	rep.sweeps = sweep(ctx, o, stderr, save)
	var b strings.Builder
	rep.write(&b)
	io.WriteString(stdout, b.String())
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return nil
}

// measurement is one eda.Run of a setting.
type measurement struct {
	r       *eda.Result
	stats   []edasplit.BridgeStats
	exactly error // ExactlyOnce's verdict
	err     error // the run itself failed
	load    [2]float64
	others  float64 // CPU of other processes during the run, % of one core; -1: unknown
	waited  time.Duration
	took    time.Duration
}

func (m measurement) passes(sla time.Duration) bool {
	return m.err == nil && m.exactly == nil && m.r.EndToEnd.P999 < int64(sla)
}

// p999 orders measurements: a failed run counts as the worst.
func (m measurement) p999() int64 {
	if m.err != nil || m.r == nil {
		return 1 << 62
	}
	return m.r.EndToEnd.P999
}

// setting is one instance count of a configuration: its measurements, and
// the median one, which decides.
type setting struct {
	n  int
	ms []measurement
}

// median is the measurement of median p99.9 (the higher of the two middle
// ones for an even count, so that a tie does not favour passing).
func (s setting) median() measurement {
	ms := slices.Clone(s.ms)
	slices.SortStableFunc(ms, func(a, b measurement) int { return cmpInt(a.p999(), b.p999()) })
	return ms[len(ms)/2]
}

// passes: the median meets the SLA, and every measurement carried every
// message exactly once (a fault is not outvoted).
func (s setting) passes(sla time.Duration) bool {
	for _, m := range s.ms {
		if m.err != nil || m.exactly != nil {
			return false
		}
	}
	return s.median().passes(sla)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sweepResult is one configuration's counts.
type sweepResult struct {
	config    string
	transport string
	settings  []setting
}

// best is the largest count that passed, and the first that failed above
// it (0: none).
func (s sweepResult) best(sla time.Duration) (pass, fail int) {
	for _, st := range s.settings {
		if st.passes(sla) {
			pass = max(pass, st.n)
		}
	}
	for _, st := range s.settings {
		if !st.passes(sla) && st.n > pass && (fail == 0 || st.n < fail) {
			fail = st.n
		}
	}
	return pass, fail
}

// sweep measures every configuration at each count in turn, back to
// back (and their repeats alternating), so that on a shared machine they
// meet the same conditions; a configuration that failed a count is not
// tried at larger ones (unless -all). After each measurement, save is
// called with the results so far.
func sweep(ctx context.Context, o *options, stderr io.Writer, save func([]sweepResult)) []sweepResult {
	res := make([]sweepResult, len(o.configs))
	stopped := make([]bool, len(o.configs))
	for i, c := range o.configs {
		res[i].config = c
	}
	for _, n := range o.counts {
		if !slices.Contains(stopped, false) {
			break
		}
		sts := make([]setting, len(o.configs))
		for i := range sts {
			sts[i].n = n
		}
		for rep := range o.repeat {
			for i, c := range o.configs {
				if stopped[i] || ctx.Err() != nil {
					continue
				}
				m, name := measure(ctx, o, c, n, stderr)
				if name != "" {
					res[i].transport = name
				}
				sts[i].ms = append(sts[i].ms, m)
				logMeasurement(stderr, c, n, rep, o, m)
				if ctx.Err() == nil {
					save(withPartial(res, sts, stopped))
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		for i := range o.configs {
			if stopped[i] {
				continue
			}
			res[i].settings = append(res[i].settings, sts[i])
			if !sts[i].passes(o.sla) && !o.all {
				stopped[i] = true
			}
		}
	}
	return res
}

// withPartial is res with the settings being measured added.
func withPartial(res []sweepResult, sts []setting, stopped []bool) []sweepResult {
	out := slices.Clone(res)
	for i := range out {
		if !stopped[i] && len(sts[i].ms) > 0 {
			out[i].settings = append(slices.Clone(out[i].settings), sts[i])
		}
	}
	return out
}

func logMeasurement(w io.Writer, config string, n, rep int, o *options, m measurement) {
	fmt.Fprintf(w, "%s, %d instances, %d/%d (load %.2f, others %.0f%% of a core", config, n, rep+1, o.repeat, m.load[0], m.others)
	if m.waited > 0 {
		fmt.Fprintf(w, ", after waiting %v for quiet", m.waited.Round(time.Second))
	}
	if m.err != nil {
		fmt.Fprintf(w, "): error: %v\n", m.err)
		return
	}
	fmt.Fprintf(w, "): p99.9 %s, CPU %.0f%%, %s (%v)\n", msText(m.r.EndToEnd.P999), m.r.CPU.Percent,
		verdict(m, o.sla), m.took.Round(time.Second))
}

// measure runs one setting once.
func measure(ctx context.Context, o *options, config string, n int, stderr io.Writer) (measurement, string) {
	var m measurement
	if o.quiet > 0 {
		m.waited = waitQuiet(ctx, o.quiet, o.quietWait)
	}
	var split *edasplit.Split
	var name string
	cfg := eda.Config{
		Instances: n, Rate: o.rate, Wait: o.wait, Placement: eda.InProcess, Batch: o.batch,
		Warmup: o.warmup, Runs: o.runs, RunLength: o.runLength, Grace: o.grace, Dir: o.dir,
		NoServiceProbes: true,
		Transport: func(dir string) (eda.Transport, error) {
			if config != "engine" {
				t, err := edasplit.NewSplit(dir, edasplit.SplitOptions{
					Engine: o.engine, Queues: queue.Options{BlockSpin: o.blockSpin}, Shared: config == "shared",
				})
				if err != nil {
					return nil, err
				}
				split, name = t, t.Name()
				return t, nil
			}
			t, err := edasplit.NewAllOnEngine(dir, o.engine)
			if err != nil {
				return nil, err
			}
			name = t.Name()
			return t, nil
		},
	}
	if o.verbose {
		cfg.Progress = stderr
	}
	m.load[0] = loadAvg()
	before, okBefore := cpuSample()
	start := time.Now()
	m.r, m.err = eda.Run(ctx, cfg)
	m.took = time.Since(start)
	after, okAfter := cpuSample()
	m.load[1] = loadAvg()
	m.others = -1
	if okBefore && okAfter {
		m.others = after.othersSince(before)
	}
	if m.err == nil {
		if split != nil {
			m.stats = split.Stats()
			if err := split.Err(); err != nil {
				m.err = err
			}
		}
		m.exactly = edasplit.ExactlyOnce(m.r, m.stats)
	}
	return m, name
}

// waitQuiet waits until other processes use less than limit % of one core
// over a 5-second sample, or until most has passed; it returns how long
// it waited.
func waitQuiet(ctx context.Context, limit float64, most time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < most && ctx.Err() == nil {
		a, ok := cpuSample()
		if !ok {
			return 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		b, ok := cpuSample()
		if !ok || b.othersSince(a) < limit {
			break
		}
	}
	return time.Since(start).Truncate(5 * time.Second)
}

// cpu is a sample of the machine's busy time and this process's CPU time,
// in clock ticks.
type cpu struct {
	busy, self int64
	at         time.Time
}

// cpuSample reads /proc/stat and /proc/self/stat (Linux; ok false
// elsewhere).
func cpuSample() (cpu, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpu{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return cpu{}, false
	}
	var c cpu
	for i, v := range f[1:] {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cpu{}, false
		}
		if i <= 2 || i == 5 || i == 6 { // user, nice, system, irq, softirq: not idle, iowait, steal, guest (in user)
			c.busy += x
		}
	}
	s, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return cpu{}, false
	}
	// Fields after the command name, which is in parentheses.
	_, rest, ok := strings.Cut(string(s), ") ")
	g := strings.Fields(rest)
	if !ok || len(g) < 13 {
		return cpu{}, false
	}
	ut, err1 := strconv.ParseInt(g[11], 10, 64)
	st, err2 := strconv.ParseInt(g[12], 10, 64)
	if err1 != nil || err2 != nil {
		return cpu{}, false
	}
	c.self = ut + st
	c.at = time.Now()
	return c, true
}

// othersSince is the CPU other processes used since a, in % of one core
// (clock ticks are 1/100 s on Linux).
func (c cpu) othersSince(a cpu) float64 {
	secs := c.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return -1
	}
	return max(0, float64((c.busy-a.busy)-(c.self-a.self))) / secs
}

func verdict(m measurement, sla time.Duration) string {
	switch {
	case m.err != nil:
		return "error"
	case m.exactly != nil:
		return "**fails: not exactly once**"
	case m.r.EndToEnd.P999 >= int64(sla):
		return "**fails**"
	}
	return "passes"
}

// loadAvg is the 1-minute load average, -1 if unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// machine describes this machine in one line.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	parts := []string{fmt.Sprintf("%d CPUs", runtime.NumCPU())}
	for _, p := range []string{model, runtime.GOOS + " " + kernel, runtime.Version()} {
		if strings.TrimSpace(p) != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ")
}

func instances(n int) string {
	if n == 1 {
		return "1 instance"
	}
	return strconv.Itoa(n) + " instances"
}

func msText(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 2, 64) + " ms" }

// report is what the command prints.
type report struct {
	opts    *options
	started time.Time
	machine string
	sweeps  []sweepResult
}

func (r *report) write(w io.Writer) {
	o := r.opts
	fmt.Fprintf(w, "## EDA chain: split over two hosts through the engine, against all on the engine\n\n")
	fmt.Fprintf(w, "- Command: `edasplit %s`\n", strings.Join(o.args, " "))
	fmt.Fprintf(w, "- Date: %s\n", r.started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- Machine: %s\n", r.machine)
	fmt.Fprintf(w, "- Engine: %s, embedded in this process, file storage under %s\n", o.engine, o.dir)
	wait := o.wait.String()
	if o.wait == eda.Block {
		spin := "the queue's default spin (50 us)"
		switch {
		case o.blockSpin < 0:
			spin = "no spin"
		case o.blockSpin > 0:
			spin = fmt.Sprintf("a %v spin", o.blockSpin)
		}
		wait += " (split's offmap topics: " + spin + ")"
	}
	fmt.Fprintf(w, "- Each measurement: %.0f messages a second per instance, %s wait, %v warm-up + %d runs of %v, sends released at most every %v",
		o.rate, wait, o.warmup, o.runs, o.runLength, o.batch)
	if o.repeat > 1 {
		fmt.Fprintf(w, "; each count measured %d times, the median by p99.9 shown", o.repeat)
	}
	if o.quiet > 0 {
		fmt.Fprintf(w, "; each started once other processes used under %g%% of a core (or after %v)", o.quiet, o.quietWait)
	}
	fmt.Fprint(w, "\n\n")
	for _, s := range r.sweeps {
		title := s.transport
		if title == "" {
			title = s.config
		}
		fmt.Fprintf(w, "### %s\n\n", title)
		fmt.Fprint(w, "| instances | messages | p50 | p99 | p99.9 | max | CPU % of a core | load 1 min (start, end) | others' CPU % | exactly once | SLA |")
		sep := "|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|"
		if o.repeat > 1 {
			fmt.Fprint(w, " p99.9 of each |")
			sep += "---|"
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, sep)
		for _, st := range s.settings {
			m := st.median()
			verdictText := verdict(m, o.sla)
			if st.passes(o.sla) != m.passes(o.sla) {
				verdictText = "**fails** (a repeat was not exactly once)"
			}
			if m.err != nil {
				fmt.Fprintf(w, "| %d | | | | | | | %.2f, %.2f | %.0f | | error: %s |", st.n, m.load[0], m.load[1], m.others, oneLine(m.err))
			} else {
				e := m.r.EndToEnd
				once := "yes"
				if m.exactly != nil {
					once = "**no**: " + oneLine(m.exactly)
				} else if b := bridgeNote(m.stats); b != "" {
					once += " (" + b + ")"
				}
				fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %.0f | %.2f, %.2f | %.0f | %s | %s |", st.n, m.r.Messages(),
					msText(e.P50), msText(e.P99), msText(e.P999), msText(e.Worst), m.r.CPU.Percent,
					m.load[0], m.load[1], m.others, once, verdictText)
			}
			if o.repeat > 1 {
				var each []string
				for _, x := range st.ms {
					t := "error"
					if x.err == nil {
						t = strings.TrimSuffix(msText(x.p999()), " ms")
					}
					each = append(each, fmt.Sprintf("%s (others %.0f%%)", t, x.others))
				}
				fmt.Fprintf(w, " %s |", strings.Join(each, ", "))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "Latency from the scheduled send to the receiver after five services and six topics, corrected for coordinated omission, over the measured runs, in ms; CPU of this process (chain, mirrors, ingests and the embedded engine), % of one core; others' CPU: what the rest of the machine used meanwhile, % of one core. Exactly once: every message delivered once and intact, every service's counter right, and on each bridged topic the messages appended on host A = acknowledged by the engine = ingested on host B = read by service 3, with the engine's sequences in order.\n\n")
	for _, s := range r.sweeps {
		pass, fail := s.best(o.sla)
		what := map[string]string{
			"split":  "(a) split over the engine, a stream per instance",
			"shared": "(a') split over the engine, one stream for all instances",
			"engine": "(b) all on the engine",
		}[s.config]
		switch {
		case pass == 0:
			fmt.Fprintf(w, "- %s: no count passed p99.9 < %v.\n", what, o.sla)
		case fail == 0:
			fmt.Fprintf(w, "- %s: every count tried passed, up to %s (the limit is higher).\n", what, instances(pass))
		default:
			fmt.Fprintf(w, "- %s: **%s** passed p99.9 < %v (failed at %d).\n", what, instances(pass), o.sla, fail)
		}
	}
}

// bridgeNote mentions the mirror's resends and restarts, when there were
// any: the engine de-duplicated them, but they are worth knowing.
func bridgeNote(stats []edasplit.BridgeStats) string {
	var dups, restarts uint64
	for _, s := range stats {
		dups += s.Duplicates
		restarts += s.Restarts
	}
	var parts []string
	if dups > 0 {
		parts = append(parts, fmt.Sprintf("%d resends de-duplicated by the engine", dups))
	}
	if restarts > 0 {
		parts = append(parts, fmt.Sprintf("%d mirror sessions restarted", restarts))
	}
	return strings.Join(parts, ", ")
}

func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
