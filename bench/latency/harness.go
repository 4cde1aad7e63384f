package latency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Names of the probes the harness makes itself.
const (
	EndToEndName = "end to end"
	JitterName   = "OS jitter"
)

// Options configure a Harness. Throughput and one of RunCount and
// RunDuration are required; the rest have defaults.
type Options struct {
	Name       string  // for the results
	Throughput float64 // messages per second

	// The warm-up runs at Throughput like the runs; its samples are
	// discarded. None when both are zero.
	WarmupCount    int64
	WarmupDuration time.Duration

	Runs        int           // default 3
	RunCount    int64         // messages per run, or
	RunDuration time.Duration // run length, as RunDuration*Throughput messages

	// Uncorrected measures from the moment the task is actually called and
	// lets the schedule slip after a stall, as a naive load generator
	// does; by default latency counts from the scheduled start, so a stall
	// is charged to every message it delayed (coordinated omission).
	Uncorrected bool

	// JitterThreshold, when positive, starts a goroutine that only reads
	// the clock and records every gap longer than this (OS and runtime
	// pauses), as JLBH's OS-jitter thread; 1 us is JLBH's value. It costs a
	// core while it samples, which on a 2-core machine changes what is
	// measured, so it is off by default. JitterDuty (0 < d <= 1, default 1)
	// samples in 10 ms windows for that fraction of the time.
	JitterThreshold time.Duration
	JitterDuty      float64

	// Clock defaults to a Pacer with Spin (default DefaultSpin; negative:
	// sleep only, for the least CPU), made and closed by Run.
	Clock Clock
	Spin  time.Duration

	Out           io.Writer     // per-run reports and the summary; nil: none
	Progress      io.Writer     // a progress line every ProgressEvery; nil: none
	ProgressEvery time.Duration // default 1 s

	// DrainTimeout bounds the wait, after a run's last call, for
	// end-to-end samples still in flight (default 5 s).
	DrainTimeout time.Duration
	// MaxLatency is the largest sample histograms hold (default 1 minute);
	// larger samples are recorded as MaxLatency and counted as clamped.
	MaxLatency time.Duration
}

// Harness runs a task at a fixed throughput and measures its latency
// distribution, correcting for coordinated omission, in the manner of
// JLBH. Make one with New, add probes, then call Run once.
type Harness struct {
	o        Options
	clock    Clock
	ownClock *Pacer
	perRun   int64
	warmup   int64
	interval float64 // ns between scheduled starts

	mu      sync.Mutex // guards probes and started
	started bool
	e2e     *Probe
	jitter  *Probe
	probes  []*Probe // the caller's, in order added

	phase atomic.Int64 // -1 warm-up, else the run index
	sent  atomic.Int64 // calls in the current phase
}

// New checks o and returns a Harness.
func New(o Options) (*Harness, error) {
	bad := func(format string, a ...any) (*Harness, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, a...)...)
	}
	if !(o.Throughput > 0) || math.IsInf(o.Throughput, 0) || o.Throughput > 1e9 {
		return bad("Throughput %v: want messages per second in (0, 1e9]", o.Throughput)
	}
	if o.Runs == 0 {
		o.Runs = 3
	}
	if o.Runs < 0 {
		return bad("Runs %d < 0", o.Runs)
	}
	msgs := func(d time.Duration) int64 { return int64(math.Round(d.Seconds() * o.Throughput)) }
	h := &Harness{o: o, interval: 1e9 / o.Throughput}
	switch {
	case o.RunCount > 0 && o.RunDuration > 0:
		return bad("set RunCount or RunDuration, not both")
	case o.RunCount > 0:
		h.perRun = o.RunCount
	case o.RunDuration > 0:
		h.perRun = msgs(o.RunDuration)
	}
	if h.perRun <= 0 {
		return bad("runs are empty: set RunCount or RunDuration (at least one message)")
	}
	if o.WarmupCount < 0 || o.WarmupDuration < 0 || o.WarmupCount > 0 && o.WarmupDuration > 0 {
		return bad("set at most one of WarmupCount and WarmupDuration, not negative")
	}
	h.warmup = o.WarmupCount + msgs(o.WarmupDuration)
	if o.JitterThreshold < 0 || o.JitterDuty < 0 || o.JitterDuty > 1 {
		return bad("JitterThreshold must be >= 0 and JitterDuty in [0, 1]")
	}
	if h.o.JitterDuty == 0 {
		h.o.JitterDuty = 1
	}
	if h.o.ProgressEvery <= 0 {
		h.o.ProgressEvery = time.Second
	}
	if h.o.DrainTimeout <= 0 {
		h.o.DrainTimeout = 5 * time.Second
	}
	if h.o.MaxLatency <= 0 {
		h.o.MaxLatency = time.Minute
	}
	if h.o.Spin == 0 {
		h.o.Spin = DefaultSpin
	}
	h.clock = o.Clock
	if h.clock == nil {
		h.ownClock = NewPacer(PacerOptions{Spin: h.o.Spin})
		h.clock = h.ownClock
	}
	h.e2e = newProbe(EndToEndName, h.clock, int64(h.o.MaxLatency))
	h.jitter = newProbe(JitterName, h.clock, int64(h.o.MaxLatency))
	return h, nil
}

// Now returns the time on the harness's clock, the scale of the start
// times the task receives.
func (h *Harness) Now() int64 { return h.clock.Now() }

// Clock returns the harness's clock.
func (h *Harness) Clock() Clock { return h.clock }

// EndToEnd returns the probe on which the task must record exactly one
// sample per call, from any goroutine: the time from the start it was
// given to the end of the work (RecordSince(start)).
func (h *Harness) EndToEnd() *Probe { return h.e2e }

// Probe returns the named probe, adding it if new. Probes must be added
// before Run; adding one later panics, as it is a programming error.
func (h *Harness) Probe(name string) *Probe {
	h.mu.Lock()
	defer h.mu.Unlock()
	if name == EndToEndName {
		return h.e2e
	}
	for _, p := range h.probes {
		if p.name == name {
			return p
		}
	}
	if h.started {
		panic(fmt.Errorf("%w: probe %q added after Run", ErrStarted, name))
	}
	if name == JitterName {
		panic(fmt.Sprintf("latency: probe name %q is reserved", name))
	}
	p := newProbe(name, h.clock, int64(h.o.MaxLatency))
	h.probes = append(h.probes, p)
	return p
}

// Run paces task at the target throughput: first the warm-up, whose samples
// are discarded, then the runs, printing a report after each and a summary
// at the end to Options.Out. Each call gets its scheduled start time;
// calls never overlap (a slow call delays the next, which then starts at
// once with its own scheduled time). The task records its end-to-end
// sample itself, possibly from another goroutine; after each run Run
// waits for the samples still in flight.
//
// When ctx is cancelled, Run returns the runs completed so far with
// ctx.Err(). Missing end-to-end samples give ErrMissingSamples, also with
// the results.
func (h *Harness) Run(ctx context.Context, task func(start int64)) (*Result, error) {
	h.mu.Lock()
	if h.started {
		h.mu.Unlock()
		return nil, ErrStarted
	}
	h.started = true
	probes := append([]*Probe{h.e2e}, h.probes...)
	h.mu.Unlock()
	if h.ownClock != nil {
		defer h.ownClock.Close()
	}

	res := &Result{
		Name: h.o.Name, Started: time.Now().UTC().Round(0), Throughput: h.o.Throughput,
		IntervalNanos: int64(math.Round(h.interval)), Corrected: !h.o.Uncorrected,
		Warmup: h.warmup, PerRun: h.perRun,
	}
	if h.o.JitterThreshold > 0 {
		res.JitterAboveNs = int64(h.o.JitterThreshold)
		probes = append(probes, h.jitter)
		stop := h.startJitter()
		defer stop()
	}
	if h.o.Progress != nil {
		stop := h.startProgress()
		defer stop()
	}

	var errs []error
	if h.warmup > 0 {
		h.phase.Store(-1)
		sent, _ := h.pace(ctx, task, h.warmup)
		h.drain(ctx, sent)
		for _, p := range probes {
			p.reset()
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	for r := range h.o.Runs {
		h.phase.Store(int64(r))
		sent, elapsed := h.pace(ctx, task, h.perRun)
		missing := h.drain(ctx, sent)
		run := RunResult{Run: r + 1, Sent: sent, ElapsedNanos: elapsed, Missing: missing}
		for _, p := range probes {
			run.Probes = append(run.Probes, p.take())
		}
		if ctx.Err() != nil && sent < h.perRun {
			break // a partial run is not comparable with the others
		}
		res.Runs = append(res.Runs, run)
		if missing > 0 {
			errs = append(errs, fmt.Errorf("%w: run %d: %d of %d", ErrMissingSamples, r+1, missing, sent))
		}
		if h.o.Out != nil {
			_ = res.writeRun(h.o.Out, len(res.Runs)-1, h.o.Runs)
		}
		if ctx.Err() != nil {
			break
		}
	}
	res.Summary = Summarize(res.Runs)
	if h.o.Out != nil {
		_ = writeSummary(h.o.Out, res.Summary, len(res.Runs))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// pace calls task n times on schedule and returns the calls made and the
// time they took.
func (h *Harness) pace(ctx context.Context, task func(int64), n int64) (sent, elapsed int64) {
	h.sent.Store(0)
	c, done := h.clock, ctx.Done()
	t0 := c.Now()
	gap := int64(math.Round(h.interval))
	prev := t0 - gap // uncorrected: the previous actual start
	for i := int64(0); i < n; i++ {
		select {
		case <-done:
			return i, c.Now() - t0
		default:
		}
		var start int64
		if h.o.Uncorrected {
			// As JLBH: the next start is a gap after the previous actual
			// start; when already late, start now and forgive the delay.
			next := prev + gap
			if now := c.Now(); now >= next {
				start = now
			} else {
				c.WaitUntil(next)
				start = next
			}
			prev = start
		} else {
			// Computed from t0, not accumulated: no drift at any rate.
			start = t0 + int64(float64(i)*h.interval)
			c.WaitUntil(start)
		}
		task(start)
		h.sent.Store(i + 1)
	}
	return n, c.Now() - t0
}

// drain waits until the task has recorded sent end-to-end samples, or
// until DrainTimeout; it returns how many are missing.
func (h *Harness) drain(ctx context.Context, sent int64) int64 {
	deadline := time.Now().Add(h.o.DrainTimeout)
	for {
		n := h.e2e.count()
		if n >= sent {
			return 0
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return sent - n
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func (h *Harness) startProgress() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(h.o.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				h.printProgress()
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (h *Harness) printProgress() {
	phase, sent := h.phase.Load(), h.sent.Load()
	what, of := "warm-up", h.warmup
	if phase >= 0 {
		what, of = fmt.Sprintf("run %d/%d", phase+1, h.o.Runs), h.perRun
	}
	p99, n := h.e2e.percentileNow(99)
	fmt.Fprintf(h.o.Progress, "%s: sent %s of %s, %s samples, end-to-end p99 %s us\n",
		what, group(sent), group(of), group(n), micros(p99))
}
