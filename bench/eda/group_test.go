package eda

import (
	"context"
	"testing"
	"time"

	"github.com/offmap/offmap/bench/latency"
)

// TestLoopTakesOverAStalledLoop opens n instances in one process, builds
// two event loops for them and runs only the second: every message of the
// first loop's instances must go through because the second takes its
// overdue groups over.
func TestLoopTakesOverAStalledLoop(t *testing.T) {
	const n = 20
	c, s := openWholeChains(t, n, 7)
	c.plan = plan{Start: latency.Nanotime(), Warmup: 0, RunLength: int64(200 * time.Millisecond), Runs: 1, Instances: n, Interval: int64(time.Millisecond)}
	c.rec = newRecorder(c.plan, 2)
	loops, err := s.loops(2, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(loops[0].own) < 2 || len(loops[1].peers) != len(loops[0].own) {
		t.Fatalf("loop 0 owns %d groups, loop 1 sees %d of them", len(loops[0].own), len(loops[1].peers))
	}
	defer loops[1].close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loops[1].run(ctx) }()
	missing := c.waitDelivered(time.Now().Add(20 * time.Second))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if missing != 0 {
		t.Fatalf("%d messages missing", missing)
	}
	for _, in := range c.instances {
		want := c.plan.sends(in.id)
		if got := in.received.Load(); got != want {
			t.Fatalf("instance %d: received %d of %d", in.id, got, want)
		}
		for k, h := range in.handled {
			if h != want || in.counters[k].Load() != want {
				t.Fatalf("instance %d service %d: handled %d, counter %d, want %d", in.id, k+1, h, in.counters[k].Load(), want)
			}
		}
	}
	// The first loop's messages were released late, by the second loop,
	// and at least stealAfter late.
	var late int64
	for _, run := range c.rec.merged() {
		late = max(late, run[probeEndToEnd].Max())
	}
	if late < loops[1].stealAfter() {
		t.Fatalf("worst latency %v: the first loop's sends were not late", time.Duration(late))
	}
}
