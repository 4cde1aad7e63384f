// Command edabench runs the EDA chain benchmark: instances of a sender,
// five services and a receiver linked by six offmap queues, each instance
// sending 1,000 messages a second, with the latency from the scheduled
// send (corrected for coordinated omission) and without the correction,
// the CPU of every process, and a check of the per-client counters the
// services keep in a shared offmap.
//
// Usage:
//
//	edabench [demo]                   a short demo: one instance, about 10 s
//	edabench run   [flags]            one setting
//	edabench sweep [flags]            raise the instance count until p99.9 passes the SLA
//	edabench chart [flags]            draw docs/charts/eda.csv: p99.9 against instances, and cost
//	edabench help [COMMAND]
//
// "edabench COMMAND --help" prints a command's flags, on stdout. It
// follows the conventions of docs/CLI.md: exit status 0 on success, 2 on
// a usage error or a run that failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/internal/cliargs"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == eda.ChildArg {
		os.Exit(eda.ChildMain(os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one verb: its help and the function that runs it.
type command struct {
	name     string
	synopsis string
	summary  string
	help     string
	examples string
	// flags defines the command's flags on fs and returns the function
	// that runs it once they are parsed.
	flags func(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error
}

var commands = []*command{&demoCommand, &runCommand, &sweepCommand, &chartCommand}

// errUsage marks an error in the command line.
type errUsage struct{ error }

// run executes one command line and returns the exit status: 0 on
// success, 2 for a usage error or a failed run (docs/CLI.md).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		args = []string{"demo"}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) == 1 {
			writeOverview(stdout)
			return cliargs.ExitOK
		}
		args = []string{args[1], "--help"}
	}
	var cmd *command
	for _, c := range commands {
		if c.name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "edabench: unknown command %q (see 'edabench help')\n", args[0])
		return cliargs.ExitError
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	job := cmd.flags(fs)
	pos, err := cliargs.Parse(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(stdout, cmd, fs)
		return cliargs.ExitOK
	}
	switch {
	case err != nil:
		err = errUsage{err}
	case len(pos) > 0 && fs.Lookup("json") != nil && fs.Lookup("json").Value.String() == "true":
		err = usageErrorf("unexpected argument %q: --json prints the JSON on stdout, --out FILE writes it to a file", pos[0])
	case len(pos) > 0:
		err = usageErrorf("unexpected argument %q", pos[0])
	default:
		err = job(ctx, stdout, stderr)
	}
	var u errUsage
	switch {
	case err == nil:
		return cliargs.ExitOK
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "edabench: %s: %v (see 'edabench %s --help')\n", cmd.name, err, cmd.name)
	default:
		fmt.Fprintf(stderr, "edabench: %s: %v\n", cmd.name, err)
	}
	return cliargs.ExitError
}

// usageErrorf is an error in the command line.
func usageErrorf(format string, args ...any) error {
	return errUsage{fmt.Errorf(format, args...)}
}

func writeOverview(w io.Writer) {
	fmt.Fprint(w, `edabench runs the EDA chain benchmark on offmap queues.

usage: edabench [COMMAND [flags]]

commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-6s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprint(w, `
With no command, edabench runs the demo. 'edabench COMMAND --help' describes
a command, with examples. Exit status: 0 success; 2 usage error or a run
that failed (messages lost, counters wrong). docs/CLI.md has the
conventions edabench shares with the other tools.
`)
}

// writeHelp prints a command's --help: usage, description, flags, examples.
func writeHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: edabench %s %s\n\n%s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
	cliargs.WriteFlags(w, fs)
	fmt.Fprintf(w, "\nexamples:\n%s\n", strings.TrimRight(cmd.examples, "\n"))
}

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
	fs.StringVar(&s.wait, "wait", "loop", "how services wait: loop (event loops), park (the Chronicle EDA article's poll-and-sleep), block (goroutine per service)")
	fs.StringVar(&s.placement, "placement", "process", "process (all in this process), instance (a process per instance), service (a process per service), cpu (a process per CPU, one P each, the instances shared out)")
	fs.IntVar(&s.workers, "workers", runtime.GOMAXPROCS(0), "event loops per process (wait loop)")
	fs.DurationVar(&s.batch, "batch", time.Millisecond, "release due sends at most this often (0: each on time)")
	fs.DurationVar(&s.warmup, "warmup", 3*time.Second, "warm-up, not measured")
	fs.IntVar(&s.runs, "runs", 3, "measured runs")
	fs.DurationVar(&s.runLength, "run", 5*time.Second, "length of a run")
	fs.StringVar(&s.dir, "dir", os.TempDir(), "directory for the queues and the counter map")
	fs.BoolVar(&s.verbose, "v", false, "also print, on standard error, a progress line a second and each run's percentiles per probe (JLBH style, in us)")
	fs.StringVar(&s.profile, "cpuprofile", "", "write a CPU profile of this process over the measured runs (not the set-up and warm-up) to this file")
	fs.BoolVar(&s.probes, "service-probes", true, "also record the latency up to each service (five more samples per message)")
	fs.StringVar(&s.pin, "pin", "auto", "bind each event loop (wait loop), or each process of --placement cpu, to a CPU of its own: on, off, or auto (on for all instances in one process at 250,000 msg/s or more, and for --placement cpu)")
}

// pinRate is the message rate of one process from which --pin auto pins
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
		return eda.Config{}, usageErrorf("cannot use --dir %s: not a directory", s.dir)
	}
	probe, err := os.MkdirTemp(s.dir, "edabench-probe-")
	if err != nil {
		return eda.Config{}, fmt.Errorf("cannot use --dir %s: %v", s.dir, err)
	}
	os.Remove(probe)
	// Pinned loops lower the CPU of one busy process (12 % at 500,000
	// messages a second); where loops mostly sleep, in a process per
	// instance or at a few hundred thousand messages a second or less,
	// the thread hand-offs of a locked goroutine that blocks cost more
	// (docs/BENCHMARKS.md). A process per CPU bound to its CPU took a
	// fifth off the park loop's p99.9 at 200 instances.
	var pin bool
	switch s.pin {
	case "on":
		pin = true
	case "auto":
		pin = p == eda.InProcess && float64(instances)*s.rate >= pinRate || p == eda.ProcessPerCPU
	case "off":
	default:
		return eda.Config{}, usageErrorf("--pin %q: want on, off or auto", s.pin)
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

var demoCommand = command{
	name:     "demo",
	synopsis: "",
	summary:  "a short demo: one instance, about 10 seconds (also edabench with no command)",
	help: `Runs one instance of the chain (a sender, five services and a receiver
linked by six offmap queues, 1,000 messages a second) for two measured runs
of 4 s after a 2 s warm-up, and prints the latency table and the result.`,
	examples: `  # the demo
  edabench`,
	flags: func(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error {
		return demo
	},
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
	fmt.Fprint(stdout, "\nNext: edabench run --instances 100 (one setting), edabench sweep (the largest count under the SLA);\n"+
		"-v prints each run's percentiles as JLBH does, in us; 'edabench help' lists the commands.\n")
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

var runCommand = command{
	name:     "run",
	synopsis: "[flags]",
	summary:  "one setting",
	help: `Runs one setting: --instances chains, each sending --rate messages a second,
for --runs measured runs of --run after a --warmup. Prints the latency table
(corrected for coordinated omission and not), the CPU of every process and
the result; with --json, the result as JSON on stdout instead (the table
then goes to stderr). Fails (status 2) when messages or counters did not
add up.`,
	examples: `  # 100 instances, the Chronicle EDA article's poll-and-sleep services, 15 s runs
  edabench run --instances 100 --wait park --run 15s
  # the result as JSON, for a script
  edabench run --instances 100 --json | jq '.[0].end_to_end'
  # the same, kept in a file
  edabench run --instances 100 -o r.json`,
	flags: func(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error {
		var s settings
		s.register(fs)
		n := cliargs.Count(fs, "instances", 1, "`N` instances (chains)")
		asJSON := fs.Bool("json", false, "print the result as JSON on stdout (a one-element array, as sweep.json holds them); the table goes to stderr")
		out := fs.String("out", "", "also write the result as JSON to `FILE`")
		cliargs.Alias(fs, "o", "out")
		return func(ctx context.Context, stdout, stderr io.Writer) error {
			return runOne(ctx, s, *n, *asJSON, *out, stdout, stderr)
		}
	},
}

func runOne(ctx context.Context, s settings, n int, asJSON bool, out string, stdout, stderr io.Writer) error {
	if n < 1 {
		return usageErrorf("--instances %d: want 1 or more", n)
	}
	cfg, err := s.config(n, stderr)
	if err != nil {
		return err
	}
	var prof *os.File
	if s.profile != "" {
		if prof, err = os.Create(s.profile); err != nil {
			return err
		}
		cfg.CPUProfile = prof
	}
	text := stdout
	if asJSON {
		text = stderr
	}
	describe(text, instances(n), cfg)
	r, err := eda.Run(ctx, cfg)
	if prof != nil {
		if cerr := prof.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return interrupted(ctx, err)
	}
	v := verdict{sla: 100 * time.Millisecond}
	writeTable(text, []*eda.Result{r}, v)
	writeRunResult(text, r, v)
	if out != "" {
		if err := writeJSON(out, []*eda.Result{r}); err != nil {
			return err
		}
	}
	if asJSON {
		if err := printJSON(stdout, []*eda.Result{r}); err != nil {
			return err
		}
	}
	return checked(r)
}

// checked fails a run whose messages or counters did not add up.
func checked(r *eda.Result) error {
	if !r.Lost() {
		return nil
	}
	return fmt.Errorf("%d instances: sent %d, delivered %d, bad %d, counter errors %v",
		r.Instances, r.Sent, r.Delivered, r.Bad, r.CounterErrors)
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := cliargs.ParseCount(f)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return nil, usageErrorf("bad instance count %q in --counts", f)
		}
		out = append(out, int(n))
	}
	return out, nil
}
