package shm

import (
	"testing"
	"time"
)

// A spin loop yields, but no more than once per YieldEvery: ten yields
// take at least ten periods from the first reading of the clock; and it
// does yield, ten times well within 5 s (a goroutine that loses its CPU
// for a while, on a loaded machine or under Wine, yields later, never
// sooner).
func TestSpinYieldSpacing(t *testing.T) {
	var y SpinYield
	start := time.Now()
	for y.yields < 10 && time.Since(start) < 5*time.Second {
		y.Poll()
	}
	if d := time.Since(start); y.yields < 10 || d < 10*YieldEvery {
		t.Errorf("%d yields in %v, want 10 in at least %v", y.yields, d, 10*YieldEvery)
	}
}

// Polling allocates nothing.
func TestSpinYieldAllocs(t *testing.T) {
	var y SpinYield
	if n := testing.AllocsPerRun(1000, y.Poll); n != 0 {
		t.Errorf("Poll allocates %v times", n)
	}
}
