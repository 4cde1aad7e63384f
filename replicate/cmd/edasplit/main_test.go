package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/bench/eda"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-max", "20"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 5, 10, 15, 20}; !slices.Equal(o.counts, want) {
		t.Errorf("-max 20: counts %v, want %v", o.counts, want)
	}
	if !slices.Equal(o.configs, []string{"split", "engine"}) || o.wait != eda.Park || o.engine.Nodes != 1 {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseFlags([]string{"--instances", "3,7", "--run", "2s", "--engine", "nats", "-o", "x.md", "-configs", "engine"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.counts, []int{3, 7}) || o.runLength != 2*time.Second || o.out != "x.md" || !slices.Equal(o.configs, []string{"engine"}) {
		t.Errorf("flags: %+v", o)
	}
	for _, bad := range [][]string{
		{"-engine", "kafka"}, {"-instances", "0"}, {"-wait", "loop"}, {"-nodes", "2"},
		{"-replicas", "3"}, {"-configs", "split,x"}, {"-repeat", "0"}, {"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func result(p999 time.Duration) measurement {
	return measurement{r: &eda.Result{EndToEnd: eda.Figures{P999: int64(p999)}}}
}

// The median decides a setting, but a repeat that was not exactly once
// fails it whatever the latency.
func TestSettingVerdict(t *testing.T) {
	sla := 100 * time.Millisecond
	s := setting{n: 5, ms: []measurement{result(300 * time.Millisecond), result(50 * time.Millisecond), result(90 * time.Millisecond)}}
	if got := s.median().p999(); got != int64(90*time.Millisecond) {
		t.Errorf("median p99.9 %v, want 90ms", time.Duration(got))
	}
	if !s.passes(sla) {
		t.Error("median 90 ms does not pass")
	}
	s.ms[0].exactly = errors.New("lost one")
	if s.passes(sla) {
		t.Error("a repeat that lost a message passes")
	}
	even := setting{n: 1, ms: []measurement{result(50 * time.Millisecond), result(150 * time.Millisecond)}}
	if even.passes(sla) {
		t.Error("of two, the higher decides: 150 ms passes")
	}
	sw := sweepResult{settings: []setting{
		{n: 1, ms: []measurement{result(10 * time.Millisecond)}},
		{n: 5, ms: []measurement{result(200 * time.Millisecond)}},
		{n: 10, ms: []measurement{result(20 * time.Millisecond)}}, // noise: passes above a failure
		{n: 20, ms: []measurement{result(500 * time.Millisecond)}},
	}}
	if pass, fail := sw.best(sla); pass != 10 || fail != 20 {
		t.Errorf("best = %d, fails at %d; want 10, 20", pass, fail)
	}
}

func TestReport(t *testing.T) {
	o, err := parseFlags([]string{"-instances", "1,2", "-repeat", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &report{opts: o, started: time.Unix(0, 0), machine: "test", sweeps: []sweepResult{{
		config: "split", transport: "split: test",
		settings: []setting{
			{n: 1, ms: []measurement{result(10 * time.Millisecond), result(20 * time.Millisecond)}},
			{n: 2, ms: []measurement{result(110 * time.Millisecond), {err: errors.New("engine gone")}}},
		},
	}}}
	var b strings.Builder
	r.write(&b)
	out := b.String()
	for _, want := range []string{"### split: test", "| 1 | 0 |", "20.00 ms", "| 2 | |", "error: engine gone",
		"(a) split over the engine, a stream per instance: **1 instance** passed p99.9 < 100ms (failed at 2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
