package shm

import (
	"testing"
	"time"
)

// A spin loop yields, but no more than once per YieldEvery: three yields
// take at least three periods from the first reading of the clock; and it
// does yield, some ten times in 20 periods.
func TestSpinYieldSpacing(t *testing.T) {
	var y SpinYield
	start := time.Now()
	for y.yields < 3 && time.Since(start) < time.Second {
		y.Poll()
	}
	if d := time.Since(start); y.yields < 3 || d < 3*YieldEvery {
		t.Errorf("%d yields in %v, want 3 in at least %v", y.yields, d, 3*YieldEvery)
	}
	y = SpinYield{}
	for start = time.Now(); time.Since(start) < 20*YieldEvery; {
		y.Poll()
	}
	// 19 or 20 on a quiet machine; the goroutine may lose its CPU for a
	// while, which costs yields, not adds them.
	if y.yields < 5 || y.yields > 20 {
		t.Errorf("%d yields in %v, want about 19", y.yields, 20*YieldEvery)
	}
}

// Polling allocates nothing.
func TestSpinYieldAllocs(t *testing.T) {
	var y SpinYield
	if n := testing.AllocsPerRun(1000, y.Poll); n != 0 {
		t.Errorf("Poll allocates %v times", n)
	}
}
