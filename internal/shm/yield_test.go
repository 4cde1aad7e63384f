package shm

import (
	"testing"
	"time"
)

// A spin loop yields, but no more than once per YieldEvery: three yields
// take at least three periods from the first reading of the clock.
func TestSpinYieldSpacing(t *testing.T) {
	var y SpinYield
	start := time.Now()
	polls := 0
	for y.yields < 3 {
		y.Poll()
		polls++
	}
	if d := time.Since(start); d < 3*YieldEvery {
		t.Errorf("3 yields in %v, want at least %v", d, 3*YieldEvery)
	}
	if polls < 3*64 {
		t.Errorf("3 yields in %d polls: the clock is read more often than every 64", polls)
	}
}

// Polling allocates nothing.
func TestSpinYieldAllocs(t *testing.T) {
	var y SpinYield
	if n := testing.AllocsPerRun(1000, y.Poll); n != 0 {
		t.Errorf("Poll allocates %v times", n)
	}
}
