package main

import (
	"errors"
	"slices"
	"strings"
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

// late marks n of r's messages late: still on their way, the chain
// draining, when the wait ended. r's runs carry 5 messages each.
func late(r *eda.Result, n int64) *eda.Result {
	r.Latency.PerRun = 5
	r.Delivered -= n
	r.Late = n
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
		{"median, late messages: the last run fails", median, late(result(10*ms, 10*ms, 10*ms, 10*ms), 1), false, 2},
		{"median, late messages of two runs", median, late(result(10*ms, 10*ms, 10*ms, 10*ms), 6), false, 1},
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

// TestSweepResult: a sweep reports a limit only when a count that met
// the SLA is followed by one that failed it; every other ending says why
// it ended and that the largest passing count is not a limit.
func TestSweepResult(t *testing.T) {
	const ms = time.Millisecond
	v := verdict{sla: 100 * ms, over: "all"}
	at := func(n int, p999 time.Duration) *eda.Result {
		r := result(p999)
		r.Instances = n
		return r
	}
	lost := at(300, 20*ms)
	lost.Delivered--
	for _, c := range []struct {
		name     string
		rs       []*eda.Result
		end      sweepEnd
		want     []string
		notLimit bool
	}{
		{"limit found", []*eda.Result{at(200, 20*ms), at(300, 40*ms), at(500, 900*ms)}, sweepEnd{reason: stopFailed, at: 500},
			[]string{"300 instances met the SLA (p99.9 40.00 ms over all runs pooled, under 100 ms)", "500, the next count tried, failed it (p99.9 900.00 ms",
				"the limit lies from 300 to 499 instances."}, false},
		{"limit found between neighbours", []*eda.Result{at(4, 20*ms), at(5, 200*ms)}, sweepEnd{reason: stopFailed, at: 5},
			[]string{"the limit is 4 instances."}, false},
		{"first count fails", []*eda.Result{at(1, 120*ms)}, sweepEnd{reason: stopFailed, at: 1},
			[]string{"no count met the SLA: at 1 instance, the first count tried, p99.9 120.00 ms"}, false},
		{"every count passes", []*eda.Result{at(1, 2*ms), at(10, 3*ms)}, sweepEnd{reason: stopEnd, at: 10},
			[]string{"every count tried met the SLA, up to 10 instances", "The limit was not reached: it is 10 or more"}, false},
		{"saturated", []*eda.Result{at(1, 2*ms), at(50, 30*ms)}, sweepEnd{reason: stopSaturated, at: 50, cpu: 196, saturation: 95, cores: 2},
			[]string{"stopped at 50 instances: the SLA was met, but the CPU reached 196 % of one core, over -saturation 95 % of the 2 cores"}, true},
		{"lost messages", []*eda.Result{at(200, 20*ms), lost}, sweepEnd{reason: stopLost, at: 300},
			[]string{"cut short at 300 instances: messages were lost", "sent 10, delivered 9", "a fault, not a latency limit"}, true},
		{"time limit before a count", []*eda.Result{at(200, 20*ms)}, sweepEnd{reason: stopTime, at: 300, limit: 10 * time.Minute},
			[]string{"cut short by -time-limit 10m: 300 instances would not have finished within it."}, true},
		{"time limit during a count", []*eda.Result{at(200, 20*ms)}, sweepEnd{reason: stopTime, at: 300, limit: 90 * time.Second, started: true},
			[]string{"cut short by -time-limit 1m30s: 300 instances was stopped when the time was up."}, true},
		{"error", []*eda.Result{at(200, 20*ms)}, sweepEnd{reason: stopError, at: 300, err: errors.New("child 3 exited during the run")},
			[]string{"cut short at 300 instances: child 3 exited during the run."}, true},
		{"interrupted before any count", nil, sweepEnd{reason: stopError, at: 1, err: errors.New("interrupted")},
			[]string{"cut short at 1 instance: interrupted. No count met the SLA before it: no limit was found."}, false},
	} {
		got := sweepResult(c.rs, c.end, v)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q\nlacks %q", c.name, got, w)
			}
		}
		if c.notLimit && !strings.Contains(got, "200 instances, the largest count that met the SLA (p99.9 20.00 ms over all runs pooled), is not a limit found: the limit is 200 or more.") &&
			!strings.Contains(got, "50 instances, the largest count that met the SLA") {
			t.Errorf("%s: %q\ndoes not say the largest passing count is no limit", c.name, got)
		}
		if c.end.reason != stopFailed && strings.Contains(got, "limit lies") {
			t.Errorf("%s: reports a limit it did not find: %q", c.name, got)
		}
	}
}

// TestLateIsNotLost: a chain still draining its backlog when the wait for
// it ended fails the SLA, which ends a sweep with a limit found; a
// message missing, a malformed one or a wrong counter is a fault, which
// does not, even when others are late.
func TestLateIsNotLost(t *testing.T) {
	const ms = time.Millisecond
	v := verdict{sla: 100 * ms, over: "median"}
	for _, c := range []struct {
		name   string
		r      *eda.Result
		mark   string
		stops  bool
		reason stopReason
		text   string
	}{
		{"late", late(result(10*ms, 10*ms, 10*ms, 10*ms), 3), "fails", true, stopFailed, "and 3 messages were still on their way, untimed"},
		{"late and missing", func() *eda.Result { r := late(result(10*ms, 10*ms), 3); r.Delivered--; return r }(), "lost", true, stopLost, "lost messages or counts"},
		{"late and malformed", func() *eda.Result { r := late(result(10*ms, 10*ms), 3); r.Bad = 1; return r }(), "lost", true, stopLost, "lost messages or counts"},
		{"late and a counter wrong", func() *eda.Result {
			r := late(result(10*ms, 10*ms), 3)
			r.CounterErrors = []string{"instance 0 service 2: counter 7, sent 10, before it 6"}
			return r
		}(), "lost", true, stopLost, "1 counters wrong"},
		{"intact, fast", result(10*ms, 10*ms), "meets", false, 0, "every message arrived intact and every counter matched"},
	} {
		if got := v.mark(c.r); got != c.mark {
			t.Errorf("%s: marked %q, want %q", c.name, got, c.mark)
		}
		end, stop := v.ends(c.r, 300, 95, 2)
		if stop != c.stops || end.reason != c.reason {
			t.Errorf("%s: sweep ends %v (reason %d), want %v (reason %d)", c.name, stop, end.reason, c.stops, c.reason)
		}
		var b strings.Builder
		writeRunResult(&b, c.r, v)
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), c.text) {
			t.Errorf("%s: %q\nlacks %q", c.name, b.String(), c.text)
		}
		if err := checked(c.r); (err != nil) != (c.mark == "lost") {
			t.Errorf("%s: checked = %v", c.name, err)
		}
	}
}

// TestTableLegend: every column of the table and every verdict is
// explained under it, in the units the table prints.
func TestTableLegend(t *testing.T) {
	const ms = time.Millisecond
	r := result(40*ms, 30*ms, 50*ms)
	r.Instances = 2
	var b strings.Builder
	writeTable(&b, []*eda.Result{r}, verdict{sla: 100 * ms, over: "median"})
	out := b.String()
	lines := strings.Split(out, "\n")
	header := strings.Fields(lines[1])
	for _, col := range []string{"instances", "messages", "p50", "p99", "p99.9", "worst", "CPU", "runs", "SLA"} {
		if !slices.Contains(header, col) {
			t.Errorf("header lacks %q: %q", col, lines[1])
		}
	}
	if !strings.Contains(lines[0], "latency in ms, corrected") || !strings.Contains(lines[0], "latency in ms, uncorrected") {
		t.Errorf("no unit over the latency columns: %q", lines[0])
	}
	for _, want := range []string{"in ms: 50th, 99th and 99.9th percentile, and the worst", "in % of one core",
		"meets: p99.9 (corrected, median run) under 100 ms", "fails: p99.9 100 ms or more", "lost: messages lost",
		"- : runs of fewer than 10,000 messages"} {
		if !strings.Contains(out, want) {
			t.Errorf("legend lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(lines[2], "2/2") || !strings.HasSuffix(lines[2], "meets") {
		t.Errorf("row: %q", lines[2])
	}
	for i, l := range lines {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("line %d ends in blanks: %q", i+1, l)
		}
	}
}

func TestMsText(t *testing.T) {
	for ns, want := range map[int64]string{
		0: "0", 1_660: "0.00166", 67_400: "0.0674", 520_000: "0.520", 1_000_000: "1.00",
		33_160_000: "33.16", 1_266_680_000: "1266.68",
	} {
		if got := msText(ns); got != want {
			t.Errorf("msText(%d) = %q, want %q", ns, got, want)
		}
	}
}
