package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/offmap/offmap/bench/eda"
)

const defaultCounts = "1,10,25,50,100,150,200,250,300,375,500,750,1000,1500,2000"

func sweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("edabench sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s settings
	s.register(fs)
	counts := fs.String("counts", defaultCounts, "instance counts to try, in order")
	sla := fs.Duration("sla", 100*time.Millisecond, "p99.9 (corrected) a setting must stay under")
	saturation := fs.Float64("saturation", 95, "stop once CPU exceeds this % of all cores")
	out := fs.String("out", ".", "directory for sweep.json, sweep.csv and sweep.png")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: edabench sweep [flags]\n\nexample: edabench sweep -wait park -run 15s -out results\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	list, err := parseCounts(*counts)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("cannot use -out %s: %v", *out, err)
	}
	cores := float64(runtime.NumCPU())
	var results []*eda.Result
	best := 0
	for _, n := range list {
		cfg, err := s.config(n, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%d instances ...\n", n)
		r, err := eda.Run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%d instances: %w", n, err)
		}
		results = append(results, r)
		pass := meets(r, *sla)
		if pass {
			best = n
		}
		fmt.Fprintf(stderr, "  p99.9 %.2f ms, cpu %.0f%%, %s\n", ms(r.EndToEnd.P999), r.CPU.Percent, map[bool]string{true: "meets the SLA", false: "fails the SLA"}[pass])
		if !pass || r.CPU.Percent > *saturation*cores {
			break
		}
	}
	writeTable(stdout, results, *sla)
	if best > 0 {
		fmt.Fprintf(stdout, "\nLargest instance count with p99.9 under %v: %d (%s wait, %s placement)\n", *sla, best, s.wait, s.placement)
	} else {
		fmt.Fprintf(stdout, "\nNo instance count met p99.9 under %v\n", *sla)
	}
	if err := writeJSON(filepath.Join(*out, "sweep.json"), results); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(*out, "sweep.csv"), results, *sla); err != nil {
		return err
	}
	if err := writeChart(filepath.Join(*out, "sweep.png"), results, *sla,
		fmt.Sprintf("EDA chain on offmap queues: %s wait, %s placement", s.wait, s.placement)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote %s, %s and %s\n", filepath.Join(*out, "sweep.json"), filepath.Join(*out, "sweep.csv"), filepath.Join(*out, "sweep.png"))
	return nil
}

// meets reports whether a setting kept p99.9 under the SLA and carried
// every message intact.
func meets(r *eda.Result, sla time.Duration) bool {
	return r.OK() && r.EndToEnd.P999 < int64(sla)
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// writeTable prints the results in the shape of the study's Table 2, with
// the uncorrected figures beside the corrected ones.
func writeTable(w io.Writer, rs []*eda.Result, sla time.Duration) {
	fmt.Fprintln(w, "                     corrected for coordinated omission     uncorrected (as the study)")
	fmt.Fprintln(w, "Instances  Messages  Median    99%   99.9%   Worst      Median    99%   99.9%   Worst    CPU")
	for _, r := range rs {
		mark := " "
		if !meets(r, sla) {
			mark = "*"
		}
		c, u := r.EndToEnd, r.Uncorrected
		fmt.Fprintf(w, "%9d %9d %7.2f %6.2f %7.2f%s %7.2f    %7.2f %6.2f %7.2f %7.2f  %5.1f%%\n",
			r.Instances, r.Messages(), ms(c.P50), ms(c.P99), ms(c.P999), mark, ms(c.Worst),
			ms(u.P50), ms(u.P99), ms(u.P999), ms(u.Worst), r.CPU.Percent)
	}
	fmt.Fprintf(w, "Latencies in ms; CPU in %% of one core (all processes); * fails p99.9 < %v or lost messages\n", sla)
}

func writeJSON(path string, rs []*eda.Result) error {
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func writeCSV(path string, rs []*eda.Result, sla time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"instances", "wait", "placement", "messages",
		"p50_ms", "p99_ms", "p99_9_ms", "worst_ms",
		"uncorrected_p50_ms", "uncorrected_p99_ms", "uncorrected_p99_9_ms", "uncorrected_worst_ms",
		"cpu_percent", "meets_sla"})
	f2 := func(ns int64) string { return strconv.FormatFloat(ms(ns), 'f', 3, 64) }
	for _, r := range rs {
		c, u := r.EndToEnd, r.Uncorrected
		w.Write([]string{strconv.Itoa(r.Instances), r.Wait, r.Placement, strconv.FormatInt(r.Messages(), 10),
			f2(c.P50), f2(c.P99), f2(c.P999), f2(c.Worst), f2(u.P50), f2(u.P99), f2(u.P999), f2(u.Worst),
			strconv.FormatFloat(r.CPU.Percent, 'f', 1, 64), strconv.FormatBool(meets(r, sla))})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
