package eda

import (
	"runtime"
	"testing"
	"time"
)

// Once a probe has had a sample (in the warm-up), recording into any run
// allocates nothing: a run that begins does not set off a collection in
// the middle of the loops' work.
func TestRecordAllocatesOnlyAtFirstSample(t *testing.T) {
	p := plan{Start: 0, Warmup: int64(time.Second), RunLength: int64(time.Second), Runs: 3, Instances: 1, Interval: int64(time.Millisecond)}
	r := newRecorder(p, 2)
	for probe := range probes {
		r.record(0, probe, 0, 1000) // warm-up: discarded
	}
	var before, after runtime.MemStats
	for run := range p.Runs {
		at := p.measured() + int64(run)*p.RunLength
		// The first samples of the run, which used to make its histograms.
		runtime.ReadMemStats(&before)
		for probe := range probes {
			r.record(0, probe, at, 1000)
		}
		runtime.ReadMemStats(&after)
		if n := after.Mallocs - before.Mallocs; n != 0 {
			t.Fatalf("run %d: %d allocations for its first samples", run, n)
		}
	}
	h := r.merged()
	for run := range p.Runs {
		if got := h[run][probeEndToEnd].TotalCount(); got != 1 {
			t.Fatalf("run %d: %d samples, want 1 (the warm-up's are not counted)", run, got)
		}
	}
}
