package eda

import (
	"context"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		os.Exit(ChildMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// short is a small setting that every mode must carry intact.
func short(t *testing.T, instances int, w WaitMode, p Placement) Config {
	return Config{
		Instances: instances, Wait: w, Placement: p,
		Warmup: 200 * time.Millisecond, Runs: 2, RunLength: 300 * time.Millisecond,
		Grace: 20 * time.Second, Dir: t.TempDir(),
	}
}

// runIntact runs cfg and checks that the run carried everything intact.
func runIntact(t *testing.T, cfg Config) *Result {
	t.Helper()
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkIntact(t, r, cfg)
	return r
}

// checkIntact asserts that every message went through every service once,
// the counters in the shared map match, and latency was recorded for
// every measured message.
func checkIntact(t *testing.T, r *Result, cfg Config) {
	t.Helper()
	if r.Delivered != r.Sent || r.Bad != 0 || len(r.CounterErrors) != 0 {
		t.Fatalf("sent %d, delivered %d, bad %d, counter errors %v", r.Sent, r.Delivered, r.Bad, r.CounterErrors)
	}
	wantSent := int64(0)
	perInstance := int64((cfg.Warmup + time.Duration(cfg.Runs)*cfg.RunLength) / time.Millisecond)
	wantSent = perInstance * int64(cfg.Instances)
	if r.Sent < wantSent-int64(cfg.Instances) || r.Sent > wantSent+int64(cfg.Instances) {
		t.Fatalf("sent %d messages, plan has about %d", r.Sent, wantSent)
	}
	measured := int64(time.Duration(cfg.Runs)*cfg.RunLength/time.Millisecond) * int64(cfg.Instances)
	if n := r.Messages(); n < measured-int64(cfg.Instances) || n > measured+int64(cfg.Instances) {
		t.Fatalf("%d messages measured, want about %d", n, measured)
	}
	for _, p := range r.All {
		if p.Count != r.Messages() {
			t.Fatalf("probe %q has %d samples, end to end %d", p.Name, p.Count, r.Messages())
		}
	}
	if len(r.Latency.Runs) != cfg.Runs {
		t.Fatalf("%d runs reported", len(r.Latency.Runs))
	}
}

func TestInProcessModes(t *testing.T) {
	for _, w := range []WaitMode{Loop, Park, Block} {
		t.Run(w.String(), func(t *testing.T) {
			cfg := short(t, 3, w, InProcess)
			r := runIntact(t, cfg)
			t.Logf("%s: p50 %.3f ms, p99.9 %.3f ms, cpu %.1f%%", w, ms(r.EndToEnd.P50), ms(r.EndToEnd.P999), r.CPU.Percent)
		})
	}
}

func TestProcessPlacements(t *testing.T) {
	perCPU := 1 + min(runtime.NumCPU(), 2) // the parent and a child per CPU, at most one per instance
	for _, p := range []Placement{ProcessPerService, ProcessPerInstance, ProcessPerCPU} {
		for _, w := range []WaitMode{Loop, Block, Park} {
			if w == Park && p != ProcessPerCPU {
				continue
			}
			t.Run(p.String()+"/"+w.String(), func(t *testing.T) {
				cfg := short(t, 2, w, p)
				r := runIntact(t, cfg)
				if want := map[Placement]int{ProcessPerService: 6, ProcessPerInstance: 3, ProcessPerCPU: perCPU}[p]; r.Processes != want {
					t.Fatalf("%d processes, want %d", r.Processes, want)
				}
				t.Logf("%s/%s: p50 %.3f ms, p99.9 %.3f ms, cpu %.1f%%", p, w, ms(r.EndToEnd.P50), ms(r.EndToEnd.P999), r.CPU.Percent)
			})
		}
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// TestProbesReported: with service probes on, every run reports the two
// end-to-end probes and one per service; with them off, only the two
// end-to-end probes (not five empty ones).
func TestProbesReported(t *testing.T) {
	for _, off := range []bool{false, true} {
		cfg := short(t, 2, Loop, InProcess)
		cfg.NoServiceProbes = off
		r := runIntact(t, cfg)
		want := 2 + Services
		if off {
			want = 2
		}
		if len(r.All) != want {
			t.Fatalf("service probes off=%v: %d probes over all runs, want %d", off, len(r.All), want)
		}
		for _, run := range r.Latency.Runs {
			if len(run.Probes) != want {
				t.Fatalf("service probes off=%v: run %d has %d probes, want %d", off, run.Run, len(run.Probes), want)
			}
		}
	}
}

// TestShares: the instances are split into consecutive runs whose sizes
// differ by at most one, each instance in exactly one.
func TestShares(t *testing.T) {
	for _, c := range []struct{ n, k, runs int }{{1, 2, 1}, {2, 2, 2}, {3, 2, 2}, {7, 3, 3}, {200, 2, 2}, {5, 0, 1}} {
		got := shares(c.n, c.k)
		if len(got) != c.runs {
			t.Fatalf("shares(%d, %d): %d runs, want %d", c.n, c.k, len(got), c.runs)
		}
		var all []int
		small, large := c.n, 0
		for _, s := range got {
			all = append(all, s...)
			small, large = min(small, len(s)), max(large, len(s))
		}
		if !slices.Equal(all, allInstances(c.n)) || large-small > 1 {
			t.Fatalf("shares(%d, %d) = %v", c.n, c.k, got)
		}
	}
}
