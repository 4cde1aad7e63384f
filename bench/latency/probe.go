package latency

import (
	"math/rand/v2"
	"runtime"
	"sync"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// sigFigs is the histograms' precision: values are kept to 3 significant
// digits (0.1%), the usual choice for latency.
const sigFigs = 3

// shard is one histogram behind a lock held only for the record itself.
// The harness swaps a shard's histogram for an empty one when it collects,
// so recorders never wait for a merge.
type shard struct {
	mu      sync.Mutex
	h       *hdr.Histogram
	clamped int64
	_       [128 - 24]byte // own cache lines: recorders on other cores do not false-share
}

func (s *shard) record(ns, highest int64) {
	if ns < 0 {
		ns, s.clamped = 0, s.clamped+1
	} else if ns > highest {
		ns, s.clamped = highest, s.clamped+1
	}
	_ = s.h.RecordValue(ns) // in range: cannot fail
}

// Probe is a named latency histogram. Record is safe for concurrent use
// from any number of goroutines and allocates nothing: a sample goes to one
// of a few sharded histograms chosen at random, under a lock held for a
// few nanoseconds, and the shards are merged when the harness collects
// (each second for progress, and at the end of each run).
type Probe struct {
	name    string
	clock   Clock
	highest int64
	shards  []shard
	mask    uint32

	mu      sync.Mutex // guards what follows, and collection
	recs    []*Recorder
	run     *hdr.Histogram // collected so far in this run
	spare   *hdr.Histogram // empty, swapped into the next shard collected
	clamped int64
}

func newProbe(name string, c Clock, highest int64) *Probe {
	n := 1
	for n < 2*runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	p := &Probe{name: name, clock: c, highest: highest, shards: make([]shard, n), mask: uint32(n - 1)}
	for i := range p.shards {
		p.shards[i].h = p.newHist()
	}
	p.run, p.spare = p.newHist(), p.newHist()
	return p
}

func (p *Probe) newHist() *hdr.Histogram { return hdr.New(1, p.highest, sigFigs) }

// Name returns the probe's name.
func (p *Probe) Name() string { return p.name }

// Record adds one sample of ns nanoseconds. Negative samples count as 0
// and samples above Options.MaxLatency as MaxLatency; both are counted
// as clamped in the results.
func (p *Probe) Record(ns int64) {
	s := &p.shards[rand.Uint32()&p.mask]
	if !s.mu.TryLock() {
		// Busy: take another shard rather than queue behind it.
		s = &p.shards[rand.Uint32()&p.mask]
		s.mu.Lock()
	}
	s.record(ns, p.highest)
	s.mu.Unlock()
}

// RecordSince records the time from start (a time on the harness's clock,
// such as the scheduled start a task was given) to now.
func (p *Probe) RecordSince(start int64) { p.Record(p.clock.Now() - start) }

// Recorder is a probe's histogram reserved for one goroutine that records
// a lot: its lock is never contended except for the moment the harness
// collects. A Recorder costs about 220 KB (a histogram up to a minute at
// 3 significant digits), so make one per recording goroutine, not one per
// message source.
type Recorder struct {
	s shard
	p *Probe
}

// NewRecorder returns a Recorder whose samples count toward p.
func (p *Probe) NewRecorder() *Recorder {
	r := &Recorder{p: p}
	r.s.h = p.newHist()
	p.mu.Lock()
	p.recs = append(p.recs, r)
	p.mu.Unlock()
	return r
}

// Record adds one sample, as Probe.Record.
func (r *Recorder) Record(ns int64) {
	r.s.mu.Lock()
	r.s.record(ns, r.p.highest)
	r.s.mu.Unlock()
}

// RecordSince records the time from start to now, as Probe.RecordSince.
func (r *Recorder) RecordSince(start int64) { r.Record(r.p.clock.Now() - start) }

// collectLocked moves every shard's samples into p.run. p.mu is held.
func (p *Probe) collectLocked() {
	for i := range p.shards {
		p.collectShardLocked(&p.shards[i])
	}
	for _, r := range p.recs {
		p.collectShardLocked(&r.s)
	}
}

func (p *Probe) collectShardLocked(s *shard) {
	s.mu.Lock()
	if s.h.TotalCount() == 0 && s.clamped == 0 {
		s.mu.Unlock()
		return
	}
	h, c := s.h, s.clamped
	s.h, s.clamped = p.spare, 0
	s.mu.Unlock()
	p.run.Merge(h) // cannot drop: same range
	h.Reset()
	p.spare = h
	p.clamped += c
}

// countLocked returns the samples recorded since the last reset, without
// collecting. p.mu is held.
func (p *Probe) countLocked() int64 {
	n := p.run.TotalCount()
	count := func(s *shard) {
		s.mu.Lock()
		n += s.h.TotalCount()
		s.mu.Unlock()
	}
	for i := range p.shards {
		count(&p.shards[i])
	}
	for _, r := range p.recs {
		count(&r.s)
	}
	return n
}

func (p *Probe) count() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.countLocked()
}

// take collects, returns the run's statistics and starts a new run.
func (p *Probe) take() ProbeStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.collectLocked()
	st := statsOf(p.name, p.run, p.clamped)
	p.run.Reset()
	p.clamped = 0
	return st
}

// reset discards everything recorded so far (the warm-up).
func (p *Probe) reset() { _ = p.take() }

// percentileNow collects and returns a percentile of the run so far.
func (p *Probe) percentileNow(q float64) (int64, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.collectLocked()
	return p.run.ValueAtPercentile(q), p.run.TotalCount()
}
