package main

import (
	"testing"
	"time"

	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/bench/latency"
)

// result makes an intact result whose runs have the given end-to-end
// p99.9s and whose pooled p99.9 is pooled.
func result(pooled time.Duration, runs ...time.Duration) *eda.Result {
	r := &eda.Result{Sent: 10, Delivered: 10, Latency: &latency.Result{}}
	r.EndToEnd.P999 = int64(pooled)
	for i, p := range runs {
		r.Latency.Runs = append(r.Latency.Runs, latency.RunResult{Run: i + 1, Probes: []latency.ProbeStats{
			{Name: eda.ProbeUncorrected, Percentiles: []latency.Percentile{{P: 99.9, Nanos: 1}}},
			{Name: eda.ProbeEndToEnd, Percentiles: []latency.Percentile{{P: 50, Nanos: 1}, {P: 99.9, Nanos: int64(p)}}},
		}})
	}
	return r
}

func TestVerdict(t *testing.T) {
	const ms = time.Millisecond
	all := verdict{sla: 100 * ms, over: "all"}
	median := verdict{sla: 100 * ms, over: "median"}
	oneBadRun := result(180*ms, 60*ms, 400*ms, 70*ms)
	for _, c := range []struct {
		name string
		v    verdict
		r    *eda.Result
		want bool
		k    int
	}{
		{"pooled, one bad run", all, oneBadRun, false, 2},
		{"median, one bad run", median, oneBadRun, true, 2},
		{"median, two bad runs", median, result(180*ms, 60*ms, 400*ms, 170*ms), false, 1},
		{"median, even runs takes the upper", median, result(90*ms, 60*ms, 120*ms), false, 1},
		{"pooled, all good", all, result(90*ms, 60*ms, 80*ms, 70*ms), true, 3},
		{"median, lost messages", median, func() *eda.Result { r := result(10*ms, 10*ms); r.Delivered--; return r }(), false, 1},
		{"median, runs too short: pooled, passing", median, result(10 * ms), true, 0},
		{"median, runs too short: pooled, failing", median, result(110 * ms), false, 0},
	} {
		if got := c.v.meets(c.r); got != c.want {
			t.Errorf("%s: meets = %v, want %v", c.name, got, c.want)
		}
		if k, n := c.v.runsMeeting(c.r); k != c.k || n != len(c.r.Latency.Runs) {
			t.Errorf("%s: runsMeeting = %d of %d, want %d of %d", c.name, k, n, c.k, len(c.r.Latency.Runs))
		}
	}
}

// TestPinSetting: -pin auto pins the loops of one process carrying at
// least pinRate messages a second, and only those.
func TestPinSetting(t *testing.T) {
	for _, c := range []struct {
		pin, placement string
		instances      int
		want           bool
	}{
		{"auto", "process", 1, false},
		{"auto", "process", 249, false},
		{"auto", "process", 250, true},
		{"auto", "process", 500, true},
		{"auto", "instance", 500, false},
		{"auto", "service", 500, false},
		{"on", "instance", 1, true},
		{"off", "process", 500, false},
	} {
		s := settings{rate: 1000, wait: "loop", placement: c.placement, pin: c.pin, dir: t.TempDir()}
		cfg, err := s.config(c.instances, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.PinLoops != c.want {
			t.Errorf("-pin %s, %s placement, %d instances: pinned %v, want %v", c.pin, c.placement, c.instances, cfg.PinLoops, c.want)
		}
	}
}
