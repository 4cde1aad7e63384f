package eda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/offmap/offmap/bench/latency"
	"github.com/offmap/offmap/offmap"
)

// Result is the outcome of one setting.
type Result struct {
	Transport string        `json:"transport"`
	Instances int           `json:"instances"`
	Rate      float64       `json:"rate_per_instance"`
	Wait      string        `json:"wait"`
	Placement string        `json:"placement"`
	Workers   int           `json:"workers"`
	Batch     time.Duration `json:"batch_ns"`
	Pinned    bool          `json:"pinned_loops"`
	Processes int           `json:"processes"`

	// Latency holds each run's probes and JLBH's summary across runs.
	Latency *latency.Result `json:"latency"`
	// All is every probe over all runs together.
	All []latency.ProbeStats `json:"all_runs"`
	// EndToEnd and Uncorrected are the table's figures, over all runs:
	// latency from the scheduled send (corrected for coordinated
	// omission) and from the actual send.
	EndToEnd    Figures `json:"end_to_end"`
	Uncorrected Figures `json:"uncorrected"`
	// CPU is the CPU time of every process of the run over the measured
	// runs, as a percentage of one core.
	CPU latency.CPUUsage `json:"cpu"`

	Sent      int64 `json:"sent"`      // messages of the whole plan, warm-up included
	Delivered int64 `json:"delivered"` // of those, received
	Bad       int64 `json:"bad"`       // malformed, or not incremented by every service
	// Late is how many were still on their way when the wait for them
	// ended with the chain still draining its backlog: an overload, not a
	// loss. Their latency is in no histogram, so the run fails its SLA.
	Late int64 `json:"late,omitempty"`
	// CounterErrors lists counters in the shared map that differ from the
	// messages their service handled; the run fails if any.
	CounterErrors []string `json:"counter_errors,omitempty"`
}

// Figures are a latency distribution's headline percentiles, in ns.
type Figures struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50_ns"`
	P90   int64 `json:"p90_ns"`
	P99   int64 `json:"p99_ns"`
	P999  int64 `json:"p99_9_ns"`
	P9999 int64 `json:"p99_99_ns"`
	Worst int64 `json:"worst_ns"`
}

func figuresOf(h *hdr.Histogram) Figures {
	if h.TotalCount() == 0 {
		return Figures{}
	}
	return Figures{
		Count: h.TotalCount(),
		P50:   h.ValueAtPercentile(50), P90: h.ValueAtPercentile(90), P99: h.ValueAtPercentile(99),
		P999: h.ValueAtPercentile(99.9), P9999: h.ValueAtPercentile(99.99), Worst: h.Max(),
	}
}

// Stat returns a probe's statistics over all runs.
func (r *Result) Stat(probe string) latency.ProbeStats {
	for _, p := range r.All {
		if p.Name == probe {
			return p
		}
	}
	return latency.ProbeStats{}
}

// Messages is how many messages the measured runs carried end to end.
func (r *Result) Messages() int64 { return r.EndToEnd.Count }

// OK reports whether every message arrived intact and every counter
// matched.
func (r *Result) OK() bool {
	return r.Delivered == r.Sent && r.Bad == 0 && len(r.CounterErrors) == 0
}

// Lost reports a fault: a message or a count went missing or wrong, rather
// than late.
func (r *Result) Lost() bool {
	return r.Delivered+r.Late != r.Sent || r.Bad != 0 || len(r.CounterErrors) != 0
}

// Run runs one setting and returns what it measured.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.Dir, "eda-run-")
	if err != nil {
		return nil, fmt.Errorf("eda: %w", err)
	}
	defer os.RemoveAll(dir)
	seed := rand.Uint32()
	p := plan{
		Warmup: int64(cfg.Warmup), RunLength: int64(cfg.RunLength), Runs: cfg.Runs,
		Instances: cfg.Instances, Interval: int64(cfg.interval()),
	}
	counters, err := openCounters(dir, cfg.Instances)
	if err != nil {
		return nil, err
	}
	defer counters.Close()
	tr, err := newTransport(cfg, dir)
	if err != nil {
		return nil, err
	}
	defer tr.Close()

	// What this process serves, and what child processes do.
	var local role
	var kids []role
	switch cfg.Placement {
	case InProcess:
		local = role{Instances: allInstances(cfg.Instances), Senders: true, Services: []int{1, 2, 3, 4, 5}, Receivers: true}
	case ProcessPerService:
		local = role{Instances: allInstances(cfg.Instances), Senders: true, Receivers: true}
		for s := 1; s <= Services; s++ {
			kids = append(kids, role{Instances: allInstances(cfg.Instances), Services: []int{s}})
		}
	case ProcessPerInstance:
		for i := range cfg.Instances {
			kids = append(kids, role{Instances: []int{i}, Senders: true, Services: []int{1, 2, 3, 4, 5}, Receivers: true})
		}
	case ProcessPerCPU:
		for _, share := range shares(cfg.Instances, runtime.NumCPU()) {
			kids = append(kids, role{Instances: share, Senders: true, Services: []int{1, 2, 3, 4, 5}, Receivers: true})
		}
	}
	c := &chain{counters: counters, serviceProbes: !cfg.NoServiceProbes}
	srv, err := open(c, tr, seed, local)
	if err != nil {
		return nil, err
	}
	// A child that dies ends the run at once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	procs, err := startChildren(ctx, cfg, dir, seed, p, kids, cancel)
	if err != nil {
		return nil, err
	}
	defer procs.kill()

	// Everyone is set up: start in a moment, on the shared clock.
	p.Start = latency.Nanotime() + int64(100*time.Millisecond)
	c.plan = p
	c.rec = newRecorder(p, max(cfg.Workers, 16))
	if err := procs.start(p.Start); err != nil {
		return nil, err
	}
	if err := srv.start(cfg); err != nil {
		return nil, err
	}
	stopProgress := progress(cfg, c, counters, p)
	stopProfile := func() error { return nil }
	if cfg.CPUProfile != nil {
		stopProfile = profileRuns(cfg.CPUProfile, at(p.measured()), at(p.end()))
	}

	cpu, err := measureCPU(ctx, p, append(procs.pids(), cfg.BrokerPIDs...))
	// A chain that takes longer than its whole plan again to drain is
	// overloaded past any verdict but "fails".
	bound := at(p.end()).Add(max(cfg.Grace, time.Duration(p.end()-p.Start)))
	var late bool
	if err == nil {
		late, err = waitDone(ctx, c, counters, p, srv, procs, cfg.Grace, bound)
	}
	if ferr := procs.failed(); ferr != nil {
		err = ferr // the cause, rather than what it broke
	}
	stopProgress()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if herr := srv.halt(); err == nil {
		err = herr
	}
	reports, cerr := procs.stop()
	if err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	res := &Result{
		Transport: tr.Name(), Instances: cfg.Instances, Rate: cfg.Rate,
		Wait: cfg.Wait.String(), Placement: cfg.Placement.String(),
		Workers: cfg.Workers, Batch: cfg.Batch, Pinned: cfg.PinLoops && (cfg.Wait == Loop || cfg.Placement == ProcessPerCPU),
		Processes: 1 + len(kids), CPU: cpu,
	}
	hists := c.rec.merged()
	handled := map[[2]int]int64{}
	for _, in := range c.instances {
		for _, s := range local.Services {
			handled[[2]int{in.id, s}] += in.handled[s-1]
		}
	}
	res.Bad = c.bad.Load()
	for _, rep := range reports {
		if err := mergeEncoded(hists, rep.Hists); err != nil {
			return nil, err
		}
		for _, h := range rep.Handled {
			handled[[2]int{h.Instance, h.Service}] += h.N
		}
		res.Bad += rep.Bad
	}
	runs := runResults(hists, p)
	res.Latency = &latency.Result{
		Name:    fmt.Sprintf("EDA chain, %d instances, %s, %s", cfg.Instances, cfg.Wait, cfg.Placement),
		Started: time.Now().Add(-time.Duration(p.end() - p.Start)), Throughput: cfg.Rate * float64(cfg.Instances),
		IntervalNanos: p.Interval / int64(cfg.Instances), Corrected: true,
		PerRun: int64(float64(p.RunLength) / 1e9 * cfg.Rate * float64(cfg.Instances)),
		Runs:   runs, Summary: latency.Summarize(runs),
	}
	res.All = allRuns(hists)
	res.EndToEnd = figuresOf(mergeRuns(hists, probeEndToEnd))
	res.Uncorrected = figuresOf(mergeRuns(hists, probeUncorrected))
	for i := range cfg.Instances {
		res.Sent += p.sends(i)
		res.Delivered += counterValue(counters, i, Services) // through the last service
	}
	res.Delivered = min(res.Delivered, res.Sent-c.missing(p, local, reports))
	if late {
		res.Late = res.Sent - res.Delivered
	}
	res.CounterErrors = checkCounters(counters, cfg.Instances, handled, p, late)
	if cfg.Out != nil {
		res.Latency.WriteText(cfg.Out)
	}
	return res, nil
}

func newTransport(cfg Config, dir string) (Transport, error) {
	if cfg.Transport != nil {
		return cfg.Transport(dir)
	}
	return &Queues{Dir: dir}, nil
}

// shares splits instances 0..n-1 into at most k runs of consecutive
// instances whose sizes differ by at most one.
func shares(n, k int) [][]int {
	k = max(min(k, n), 1)
	out := make([][]int, 0, k)
	next := 0
	for i := range k {
		size := n / k
		if i < n%k {
			size++
		}
		share := make([]int, size)
		for j := range share {
			share[j] = next + j
		}
		next += size
		out = append(out, share)
	}
	return out
}

// profileRuns writes a CPU profile of this process from start to end to
// w. The returned func ends it early if need be, waits for it and says
// what went wrong.
func profileRuns(w io.Writer, start, end time.Time) func() error {
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		t := time.NewTimer(time.Until(start))
		defer t.Stop()
		select {
		case <-t.C:
		case <-quit:
			done <- errors.New("eda: the run ended before its measured part, so no CPU profile was taken")
			return
		}
		if err := pprof.StartCPUProfile(w); err != nil {
			done <- fmt.Errorf("eda: CPU profile: %w", err)
			return
		}
		t.Reset(time.Until(end))
		select {
		case <-t.C:
		case <-quit:
		}
		pprof.StopCPUProfile()
		done <- nil
	}()
	return func() error { close(quit); return <-done }
}

// at converts a time on the shared monotonic clock into wall time.
func at(t int64) time.Time { return time.Now().Add(time.Duration(t - latency.Nanotime())) }

// measureCPU returns the CPU time of this process and pids over the
// measured runs.
func measureCPU(ctx context.Context, p plan, pids []int) (latency.CPUUsage, error) {
	if err := sleepUntil(ctx, p.measured()); err != nil {
		return latency.CPUUsage{}, err
	}
	meter, err := latency.StartCPU(pids...)
	if err != nil {
		return latency.CPUUsage{}, err
	}
	if err := sleepUntil(ctx, p.end()); err != nil {
		return latency.CPUUsage{}, err
	}
	return meter.Read()
}

func sleepUntil(ctx context.Context, t int64) error {
	d := time.Duration(t - latency.Nanotime())
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitDone waits until every message has gone through the last service
// and this process's receivers have them, a serving goroutine or a child
// fails, the chain makes no progress for grace, or bound passes. It
// reports whether the chain was still moving when it gave up: an
// overloaded chain drains its backlog long after the last send, and what
// it still carries then is late, not lost.
func waitDone(ctx context.Context, c *chain, counters *offmap.Map, p plan, srv *server, procs *children, grace time.Duration, bound time.Time) (moving bool, err error) {
	var want int64
	for i := range p.Instances {
		want += p.sends(i)
	}
	d := drain{want: want, grace: grace, bound: bound, now: time.Now, pause: func() { time.Sleep(5 * time.Millisecond) }}
	moving, err = d.wait(ctx, func() (int64, error) {
		if err := srv.failed(); err != nil {
			return 0, err
		}
		if err := procs.failed(); err != nil {
			return 0, err
		}
		var through int64
		for i := range p.Instances {
			through += counterValue(counters, i, Services)
		}
		return through, nil
	})
	if err != nil || moving {
		return moving, err
	}
	c.waitDelivered(time.Now().Add(time.Second))
	time.Sleep(10 * time.Millisecond) // receivers in other processes
	return false, nil
}

// drain is the wait for a count to reach want.
type drain struct {
	want  int64
	grace time.Duration // how long it may stand still
	bound time.Time     // when it ends, moving or not
	now   func() time.Time
	pause func() // between two polls
}

// wait polls through until it reaches want. It gives up, reporting moving
// false, once through has not risen for grace (what is missing is then
// lost), or reporting moving true once bound passes while it still rises.
func (d drain) wait(ctx context.Context, through func() (int64, error)) (moving bool, err error) {
	last, lastRise := int64(-1), d.now()
	for {
		n, err := through()
		if err != nil {
			return false, err
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if n >= d.want {
			return false, nil
		}
		now := d.now()
		if n > last {
			last, lastRise = n, now
		}
		switch {
		case now.Sub(lastRise) >= d.grace:
			return false, nil
		case !now.Before(d.bound):
			return true, nil
		}
		d.pause()
	}
}

// counterValue reads the shared counter of service s of instance i.
func counterValue(m *offmap.Map, i, s int) int64 {
	v, err := m.Get(counterKey(i, s))
	if err != nil || len(v) != 8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(v))
}

// missing is how many messages no receiver got.
func (c *chain) missing(p plan, local role, reports []childReport) int64 {
	var want, got int64
	if local.Receivers {
		for _, in := range c.instances {
			want += p.sends(in.id)
		}
		got += c.received()
	}
	for _, rep := range reports {
		want += rep.Expected
		got += rep.Received
	}
	return want - got
}

// checkCounters compares every counter of the shared map with the messages
// its service handled (reported by the process that ran it), and with the
// messages the plan sent. When the chain was still draining (late), a
// service may have handled fewer than were sent, but never more than the
// service before it.
func checkCounters(m *offmap.Map, instances int, handled map[[2]int]int64, p plan, late bool) []string {
	var errs []string
	for i := range instances {
		sent := p.sends(i)
		prev := sent
		for s := 1; s <= Services; s++ {
			got, want := counterValue(m, i, s), handled[[2]int{i, s}]
			if got != want {
				errs = append(errs, fmt.Sprintf("instance %d service %d: counter %d, handled %d", i, s, got, want))
			}
			if (got != sent && !late || got > prev) && len(errs) < 20 {
				errs = append(errs, fmt.Sprintf("instance %d service %d: counter %d, sent %d, before it %d", i, s, got, sent, prev))
			}
			prev = got
		}
	}
	return errs
}

// allRuns merges each probe over the runs.
func allRuns(hs [][probes]*hdr.Histogram) []latency.ProbeStats {
	var out []latency.ProbeStats
	for _, pr := range recordedProbes(hs) {
		out = append(out, latency.StatsOf(probeName(pr), mergeRuns(hs, pr)))
	}
	return out
}

func mergeRuns(hs [][probes]*hdr.Histogram, probe int) *hdr.Histogram {
	h := newHist(probe)
	for run := range hs {
		h.Merge(hs[run][probe])
	}
	return h
}

// progress prints a line a second: elapsed time, messages through the
// chain so far and, when receivers run here, the p99 so far.
func progress(cfg Config, c *chain, counters *offmap.Map, p plan) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var through int64
			for i := range p.Instances {
				through += counterValue(counters, i, Services)
			}
			line := fmt.Sprintf("%6.1fs  %d messages through the chain", float64(latency.Nanotime()-p.Start)/1e9, through)
			if h := c.rec.merged(); len(h) > 0 {
				all := allRuns(h)[probeEndToEnd]
				if p99, ok := all.At(99); ok && all.Count > 0 {
					line += fmt.Sprintf(", p99 %.3f ms", float64(p99)/1e6)
				}
			}
			fmt.Fprintln(cfg.Progress, line)
		}
	}()
	return func() { close(done) }
}

var errChild = errors.New("eda: child process failed")
