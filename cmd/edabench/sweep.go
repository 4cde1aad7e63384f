package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/internal/cliargs"
)

const defaultCounts = "1,10,25,50,100,150,200,250,300,375,500,750,1000,1500,2000"

// Why a sweep ended. Only stopFailed finds a limit: a count that met the
// SLA followed by the next count, which failed it.
type stopReason int

const (
	stopFailed    stopReason = iota // a count failed the SLA
	stopEnd                         // every count tried met it
	stopSaturated                   // the CPU passed -saturation while the SLA was met
	stopLost                        // a setting lost messages or counts
	stopTime                        // -time-limit
	stopError                       // a setting could not run, or the sweep was interrupted
)

// sweepEnd is how a sweep ended.
type sweepEnd struct {
	reason     stopReason
	at         int           // the count it ended at (failed, saturated, lost, or not run)
	cpu        float64       // stopSaturated: the CPU at that count, % of one core
	saturation float64       // stopSaturated: the -saturation limit, % of all cores
	cores      int           // stopSaturated: cores of the machine
	limit      time.Duration // stopTime: -time-limit
	started    bool          // stopTime: the setting at was started and stopped
	err        error         // stopError
}

var sweepCommand = command{
	name:     "sweep",
	synopsis: "[flags]",
	summary:  "1, 10, 25, 50, 100, ... instances until p99.9 passes the SLA",
	help: `Runs the instance counts of --counts in turn, each as 'edabench run' does,
until one fails the SLA (p99.9 over --sla), the CPU passes --saturation,
a setting loses messages or --time-limit passes. Prints the table and the
largest count that met the SLA, and writes sweep.json, sweep.csv and
sweep.png into the directory --out; with --json, also the results as JSON
on stdout (the table then goes to stderr).`,
	examples: `  # the full sweep, services in event loops
  edabench sweep --wait loop --run 15s --out results
  # steadier on a noisy machine: the median of three runs
  edabench sweep --runs 3 --verdict median --dir /dev/shm --out results`,
	flags: sweepFlags,
}

func sweepFlags(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error {
	var s settings
	s.register(fs)
	counts := fs.String("counts", defaultCounts, "instance counts to try, in order (`LIST`)")
	var v verdict
	fs.DurationVar(&v.sla, "sla", 100*time.Millisecond, "p99.9 (corrected) a setting must stay under")
	fs.StringVar(&v.over, "verdict", "all", "p99.9 judged over all runs pooled (all) or in the median run (median: steadier on a noisy machine; use an odd --runs)")
	saturation := fs.Float64("saturation", 95, "stop once CPU exceeds this % of all cores")
	timeLimit := fs.Duration("time-limit", 0, "stop the sweep after this long, even mid-setting (0: no limit)")
	out := fs.String("out", ".", "`DIR` for sweep.json, sweep.csv and sweep.png")
	cliargs.Alias(fs, "o", "out")
	asJSON := fs.Bool("json", false, "also print the results as JSON on stdout, as sweep.json holds them; the table goes to stderr")
	return func(ctx context.Context, stdout, stderr io.Writer) error {
		return sweep(ctx, s, v, *counts, *saturation, *timeLimit, *out, *asJSON, stdout, stderr)
	}
}

func sweep(ctx context.Context, s settings, v verdict, counts string, saturation float64, timeLimit time.Duration, outDir string, asJSON bool, stdout, stderr io.Writer) error {
	jsonOut := stdout
	if asJSON {
		stdout = stderr
	}
	if v.over != "all" && v.over != "median" {
		return usageErrorf("--verdict %q: want all or median", v.over)
	}
	list, err := parseCounts(counts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("cannot use --out %s: %v", outDir, err)
	}
	first, err := s.config(list[0], stderr)
	if err != nil {
		return err
	}
	describe(stdout, strings.Join(strings.Split(counts, ","), ", ")+" instances in turn", first)
	results, end := runSweep(ctx, s, v, list, saturation, timeLimit, stderr)
	if len(results) > 0 {
		writeTable(stdout, results, v)
	}
	writeSweepResult(stdout, results, end, v)
	if len(results) > 0 {
		if err := writeJSON(filepath.Join(outDir, "sweep.json"), results); err != nil {
			return err
		}
		if err := writeCSV(filepath.Join(outDir, "sweep.csv"), results, v); err != nil {
			return err
		}
		if err := writeChart(filepath.Join(outDir, "sweep.png"), results, v,
			fmt.Sprintf("EDA chain on offmap queues: %s wait, %s", s.wait, placementText(first.Placement))); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nWrote %s, %s and %s\n", filepath.Join(outDir, "sweep.json"), filepath.Join(outDir, "sweep.csv"), filepath.Join(outDir, "sweep.png"))
	}
	if asJSON {
		if err := printJSON(jsonOut, results); err != nil {
			return err
		}
	}
	switch end.reason {
	case stopLost:
		return fmt.Errorf("sweep cut short at %s: messages lost", instances(end.at))
	case stopError:
		return fmt.Errorf("sweep cut short at %s: %w", instances(end.at), end.err)
	}
	return nil
}

// runSweep runs the counts in turn until one fails the SLA, and says why
// it stopped.
func runSweep(ctx context.Context, s settings, v verdict, list []int, saturation float64, limit time.Duration, stderr io.Writer) ([]*eda.Result, sweepEnd) {
	cores := runtime.NumCPU()
	start := time.Now()
	tctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithDeadline(ctx, start.Add(limit))
		defer cancel()
	}
	var results []*eda.Result
	for _, n := range list {
		cfg, err := s.config(n, stderr)
		if err != nil {
			return results, sweepEnd{reason: stopError, at: n, err: err}
		}
		length := cfg.Warmup + time.Duration(cfg.Runs)*cfg.RunLength
		if limit > 0 && time.Since(start)+length > limit {
			return results, sweepEnd{reason: stopTime, at: n, limit: limit}
		}
		fmt.Fprintf(stderr, "%s, about %s ...\n", instances(n), durationText(length))
		r, err := eda.Run(tctx, cfg)
		switch {
		case ctx.Err() != nil:
			return results, sweepEnd{reason: stopError, at: n, err: errors.New("interrupted")}
		case tctx.Err() != nil:
			return results, sweepEnd{reason: stopTime, at: n, limit: limit, started: true}
		case err != nil:
			return results, sweepEnd{reason: stopError, at: n, err: err}
		}
		results = append(results, r)
		fmt.Fprintf(stderr, "  %s, CPU %.0f %% of one core: %s\n", v.p999Text(r), r.CPU.Percent, v.mark(r))
		if end, stop := v.ends(r, n, saturation, cores); stop {
			return results, end
		}
	}
	return results, sweepEnd{reason: stopEnd, at: list[len(list)-1]}
}

// ends says whether a sweep ends at count n with result r, and why: a
// fault, a failed SLA (late messages included), or a saturated CPU.
func (v verdict) ends(r *eda.Result, n int, saturation float64, cores int) (sweepEnd, bool) {
	switch {
	case r.Lost():
		return sweepEnd{reason: stopLost, at: n}, true
	case !v.meets(r):
		return sweepEnd{reason: stopFailed, at: n}, true
	case r.CPU.Percent > saturation*float64(cores):
		return sweepEnd{reason: stopSaturated, at: n, cpu: r.CPU.Percent, saturation: saturation, cores: cores}, true
	}
	return sweepEnd{}, false
}

// writeSweepResult prints the sweep's one summary: the limit it found,
// or why it found none.
func writeSweepResult(w io.Writer, rs []*eda.Result, end sweepEnd, v verdict) {
	if len(rs) > 0 { // after the table's legend
		fmt.Fprintln(w)
	}
	wrap(w, "Result: "+sweepResult(rs, end, v), resultWidth)
}

// sweepResult says what a sweep found. Only a count that met the SLA
// followed by one that failed it is a limit; a sweep that ends otherwise
// says so, and what the largest passing count means then.
func sweepResult(rs []*eda.Result, end sweepEnd, v verdict) string {
	var best *eda.Result // the largest count that met the SLA
	for _, r := range rs {
		if v.meets(r) {
			best = r
		}
	}
	sla := slaText(v.sla)
	notALimit := "No count met the SLA before it: no limit was found."
	if best != nil {
		notALimit = fmt.Sprintf("%s, the largest count that met the SLA (%s), is not a limit found: the limit is %s or more.",
			instances(best.Instances), v.p999Text(best), count(int64(best.Instances)))
	}
	switch end.reason {
	case stopFailed:
		last := rs[len(rs)-1]
		if best == nil {
			return fmt.Sprintf("no count met the SLA: at %s, the first count tried, %s, %s or more.",
				instances(last.Instances), v.p999Text(last), sla)
		}
		limit := fmt.Sprintf("the limit lies from %d to %d instances", best.Instances, last.Instances-1)
		if last.Instances-1 == best.Instances {
			limit = "the limit is " + instances(best.Instances)
		}
		return fmt.Sprintf("%s met the SLA (%s, under %s), and %s, the next count tried, failed it (%s): %s.",
			instances(best.Instances), v.p999Text(best), sla, count(int64(last.Instances)), v.p999Text(last), limit)
	case stopEnd:
		return fmt.Sprintf("every count tried met the SLA, up to %s (%s). The limit was not reached: it is %s or more; add larger counts to -counts.",
			instances(best.Instances), v.p999Text(best), count(int64(best.Instances)))
	case stopSaturated:
		return fmt.Sprintf("stopped at %s: the SLA was met, but the CPU reached %.0f %% of one core, over -saturation %g %% of the %d cores, so the next count was not tried. %s",
			instances(end.at), end.cpu, end.saturation, end.cores, notALimit)
	case stopLost:
		return fmt.Sprintf("cut short at %s: messages were lost or counts were wrong (%s), a fault, not a latency limit. %s",
			instances(end.at), lostText(rs[len(rs)-1]), notALimit)
	case stopTime:
		how := "would not have finished within it"
		if end.started {
			how = "was stopped when the time was up"
		}
		return fmt.Sprintf("cut short by -time-limit %s: %s %s. %s", durationText(end.limit), instances(end.at), how, notALimit)
	}
	return fmt.Sprintf("cut short at %s: %v. %s", instances(end.at), end.err, notALimit)
}

// A verdict says whether a setting meets the SLA: every message intact
// and p99.9 (corrected) under sla, judged over all runs pooled or in the
// median run. One stall of the machine spoils a pooled p99.9; the median
// run shows what the setting does when the machine lets it.
type verdict struct {
	sla  time.Duration
	over string // "all" or "median"
}

func (v verdict) String() string {
	if v.over == "median" {
		return "median run"
	}
	return "all runs pooled"
}

func (v verdict) meets(r *eda.Result) bool {
	if !r.OK() {
		return false
	}
	p := runP999s(r)
	if v.over != "median" || len(p) == 0 {
		// Runs too short to have a p99.9 of their own are judged pooled.
		return r.EndToEnd.P999 < int64(v.sla)
	}
	slices.Sort(p)
	return p[len(p)/2] < int64(v.sla)
}

// runsMeeting counts the runs whose own p99.9 is under the SLA. The
// messages still late when the wait for them ended were the last sent, and
// the runs they belong to count as failing: their histograms lack them.
func (v verdict) runsMeeting(r *eda.Result) (k, n int) {
	p := runP999s(r)
	judged := len(p) - lateRuns(r)
	for i, ns := range p {
		if i < judged && ns < int64(v.sla) {
			k++
		}
	}
	return k, len(p)
}

// lateRuns is how many of the last runs a result's late messages would fill.
func lateRuns(r *eda.Result) int {
	if r.Late == 0 {
		return 0
	}
	if r.Latency == nil || r.Latency.PerRun <= 0 {
		return math.MaxInt // all of them
	}
	return int((r.Late + r.Latency.PerRun - 1) / r.Latency.PerRun)
}

// runP999s returns each measured run's end-to-end p99.9.
func runP999s(r *eda.Result) []int64 {
	var out []int64
	if r.Latency == nil {
		return nil
	}
	for _, run := range r.Latency.Runs {
		for _, p := range run.Probes {
			if p.Name == eda.ProbeEndToEnd {
				if ns, ok := p.At(99.9); ok {
					out = append(out, ns)
				}
			}
		}
	}
	return out
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

func writeJSON(path string, rs []*eda.Result) error {
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// printJSON prints rs on w as writeJSON writes them to a file.
func printJSON(w io.Writer, rs []*eda.Result) error {
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func writeCSV(path string, rs []*eda.Result, v verdict) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"instances", "wait", "placement", "messages",
		"p50_ms", "p99_ms", "p99_9_ms", "worst_ms",
		"uncorrected_p50_ms", "uncorrected_p99_ms", "uncorrected_p99_9_ms", "uncorrected_worst_ms",
		"cpu_percent", "meets_sla", "runs", "runs_meeting_sla"})
	f2 := func(ns int64) string { return strconv.FormatFloat(ms(ns), 'f', 3, 64) }
	for _, r := range rs {
		c, u := r.EndToEnd, r.Uncorrected
		k, n := v.runsMeeting(r)
		w.Write([]string{strconv.Itoa(r.Instances), r.Wait, r.Placement, strconv.FormatInt(r.Messages(), 10),
			f2(c.P50), f2(c.P99), f2(c.P999), f2(c.Worst), f2(u.P50), f2(u.P99), f2(u.P999), f2(u.Worst),
			strconv.FormatFloat(r.CPU.Percent, 'f', 1, 64), strconv.FormatBool(v.meets(r)), strconv.Itoa(n), strconv.Itoa(k)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
