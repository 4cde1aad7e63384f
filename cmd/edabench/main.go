// Command edabench runs the EDA chain benchmark: instances of a sender,
// five services and a receiver linked by six offmap queues, each instance
// sending 1,000 messages a second, with the latency from the scheduled
// send (corrected for coordinated omission) and without the correction,
// the CPU of every process, and a check of the per-client counters the
// services keep in a shared offmap.
//
// Usage:
//
//	edabench                          a short demo: one instance, about 10 s
//	edabench run   [flags]            one setting
//	edabench sweep [flags]            raise the instance count until p99.9 passes the SLA
//	edabench chart [flags]            draw docs/charts/eda.csv: p99.9 against instances, and cost
//
// Run "edabench run -h", "edabench sweep -h" or "edabench chart -h" for
// the flags.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/offmap/offmap/bench/eda"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == eda.ChildArg {
		os.Exit(eda.ChildMain(os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "edabench:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return demo(ctx, stdout, stderr)
	}
	switch args[0] {
	case "run":
		return runOne(ctx, args[1:], stdout, stderr)
	case "sweep":
		return sweep(ctx, args[1:], stdout, stderr)
	case "demo":
		return demo(ctx, stdout, stderr)
	case "chart":
		return chartCmd(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q (want run, sweep, chart or no argument for the demo; -h for help)", args[0])
}

const usage = `edabench runs the EDA chain benchmark on offmap queues.

  edabench                  a short demo: one instance, about 10 seconds
  edabench run [flags]      one setting, e.g. edabench run -instances 100 -wait park
  edabench sweep [flags]    1, 10, 25, 50, 100, ... instances until p99.9 passes the SLA
  edabench chart [flags]    draw the recorded results (docs/charts/eda.csv) as the study's
                            Chart 1 (p99.9 against instances) and Chart 2 (cost)

Run "edabench run -h", "edabench sweep -h" or "edabench chart -h" for the flags.
`

// settings are the flags common to run and sweep.
type settings struct {
	rate      float64
	wait      string
	placement string
	workers   int
	batch     time.Duration
	warmup    time.Duration
	runs      int
	runLength time.Duration
	dir       string
	verbose   bool
	profile   string
	probes    bool
	pin       string
}

func (s *settings) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.rate, "rate", 1000, "messages per second per instance")
	fs.StringVar(&s.wait, "wait", "loop", "how services wait: loop (event loops), park (the study's poll-and-sleep), block (goroutine per service)")
	fs.StringVar(&s.placement, "placement", "process", "process (all in this process), instance (a process per instance), service (a process per service)")
	fs.IntVar(&s.workers, "workers", runtime.GOMAXPROCS(0), "event loops per process (wait loop)")
	fs.DurationVar(&s.batch, "batch", time.Millisecond, "release due sends at most this often (0: each on time)")
	fs.DurationVar(&s.warmup, "warmup", 3*time.Second, "warm-up, not measured")
	fs.IntVar(&s.runs, "runs", 3, "measured runs")
	fs.DurationVar(&s.runLength, "run", 5*time.Second, "length of a run")
	fs.StringVar(&s.dir, "dir", os.TempDir(), "directory for the queues and the counter map")
	fs.BoolVar(&s.verbose, "v", false, "also print, on standard error, a progress line a second and each run's percentiles per probe (JLBH style, in us)")
	fs.StringVar(&s.profile, "cpuprofile", "", "write a CPU profile of this process to this file")
	fs.BoolVar(&s.probes, "service-probes", true, "also record the latency up to each service (five more samples per message)")
	fs.StringVar(&s.pin, "pin", "auto", "bind each event loop to a CPU of its own (wait loop): on, off, or auto (on for all instances in one process at 250,000 msg/s or more)")
}

// startProfile starts the CPU profile if asked for; the returned func stops it.
func (s *settings) startProfile() (func(), error) {
	if s.profile == "" {
		return func() {}, nil
	}
	f, err := os.Create(s.profile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// pinRate is the message rate of one process from which -pin auto pins
// its event loops: below it pinning cost CPU, above it saved some.
const pinRate = 250_000

func (s *settings) config(instances int, stderr io.Writer) (eda.Config, error) {
	w, err := eda.ParseWaitMode(s.wait)
	if err != nil {
		return eda.Config{}, err
	}
	p, err := eda.ParsePlacement(s.placement)
	if err != nil {
		return eda.Config{}, err
	}
	if fi, err := os.Stat(s.dir); err != nil || !fi.IsDir() {
		return eda.Config{}, fmt.Errorf("cannot use -dir %s: not a directory", s.dir)
	}
	probe, err := os.MkdirTemp(s.dir, "edabench-probe-")
	if err != nil {
		return eda.Config{}, fmt.Errorf("cannot use -dir %s: %v", s.dir, err)
	}
	os.Remove(probe)
	// Pinned loops lower the CPU of one busy process (12 % at 500,000
	// messages a second); where loops mostly sleep, in a process per
	// instance or at a few hundred thousand messages a second or less,
	// the thread hand-offs of a locked goroutine that blocks cost more
	// (docs/BENCHMARKS.md).
	var pin bool
	switch s.pin {
	case "on":
		pin = true
	case "auto":
		pin = p == eda.InProcess && float64(instances)*s.rate >= pinRate
	case "off":
	default:
		return eda.Config{}, fmt.Errorf("-pin %q: want on, off or auto", s.pin)
	}
	cfg := eda.Config{
		Instances: instances, Rate: s.rate, Wait: w, Placement: p, Workers: s.workers,
		Batch: s.batch, Warmup: s.warmup, Runs: s.runs, RunLength: s.runLength, Dir: s.dir,
		NoServiceProbes: !s.probes, PinLoops: pin,
	}
	if s.verbose {
		cfg.Out, cfg.Progress = stderr, stderr
	}
	return cfg, nil
}

// parse parses a command's flags. -h prints the flags; a mistake is one
// line that says what is wrong and where the flags are listed.
func parse(fs *flag.FlagSet, args []string) error {
	help := false
	for _, a := range args {
		if a == "--" {
			break
		}
		help = help || a == "-h" || a == "-help" || a == "--help" || a == "--h"
	}
	if !help {
		fs.SetOutput(io.Discard)
		fs.Usage = func() {}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%v (%s -h lists the flags)", err, fs.Name())
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

func demo(ctx context.Context, stdout, stderr io.Writer) error {
	s := settings{rate: 1000, wait: "loop", placement: "process", workers: runtime.GOMAXPROCS(0), probes: true, pin: "auto",
		batch: time.Millisecond, warmup: 2 * time.Second, runs: 2, runLength: 4 * time.Second, dir: os.TempDir()}
	cfg, err := s.config(1, stderr)
	if err != nil {
		return err
	}
	cfg.Progress = stderr
	describe(stdout, "1 instance", cfg)
	r, err := eda.Run(ctx, cfg)
	if err != nil {
		return interrupted(ctx, err)
	}
	v := verdict{sla: 100 * time.Millisecond}
	writeTable(stdout, []*eda.Result{r}, v)
	writeRunResult(stdout, r, v)
	fmt.Fprint(stdout, "\nNext: edabench run -instances 100 (one setting), edabench sweep (the largest count under the SLA);\n"+
		"-v prints each run's percentiles as JLBH does, in us; -h lists the flags.\n")
	return checked(r)
}

// interrupted names an interrupt as such rather than as a cancelled
// context.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return err
}

func runOne(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("edabench run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s settings
	s.register(fs)
	n := fs.Int("instances", 1, "instances (chains)")
	jsonOut := fs.String("json", "", "write the result as JSON to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edabench run [flags]\n\nexample: edabench run -instances 100 -wait park -run 15s\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := s.config(*n, stderr)
	if err != nil {
		return err
	}
	stopProfile, err := s.startProfile()
	if err != nil {
		return err
	}
	describe(stdout, instances(*n), cfg)
	r, err := eda.Run(ctx, cfg)
	stopProfile()
	if err != nil {
		return interrupted(ctx, err)
	}
	v := verdict{sla: 100 * time.Millisecond}
	writeTable(stdout, []*eda.Result{r}, v)
	writeRunResult(stdout, r, v)
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, []*eda.Result{r}); err != nil {
			return err
		}
	}
	return checked(r)
}

// checked fails a run whose messages or counters did not add up.
func checked(r *eda.Result) error {
	if r.OK() {
		return nil
	}
	return fmt.Errorf("%d instances: sent %d, delivered %d, bad %d, counter errors %v",
		r.Instances, r.Sent, r.Delivered, r.Bad, r.CounterErrors)
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad instance count %q in -counts", f)
		}
		out = append(out, n)
	}
	return out, nil
}
