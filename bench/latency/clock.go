package latency

import (
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// Clock is a benchmark's time source and its way of waiting. Times are
// nanoseconds on a monotonic scale; only differences mean anything.
// Injecting a FakeClock makes the harness deterministic in tests.
type Clock interface {
	// Now returns the current time. It must be safe for concurrent use.
	Now() int64
	// WaitUntil returns once Now() >= t, at once if t has passed, and
	// returns Now() at that moment. A harness calls it from one goroutine.
	WaitUntil(t int64) int64
}

// Nanotime returns CLOCK_MONOTONIC in nanoseconds through the vDSO, as the
// Go runtime reads it (about 30 ns here, against 1.4 us for the
// clock_gettime system call). It is one clock for every process on the
// machine, so a send time written by one process can be subtracted from a
// receive time read in another; time.Now's monotonic reading cannot do
// that (it is relative to each process's start).
//
//go:linkname Nanotime runtime.nanotime
func Nanotime() int64

// FakeClock is a Clock that moves only when told: WaitUntil jumps to the
// deadline, Advance moves by a duration. Safe for concurrent use.
type FakeClock struct{ now atomic.Int64 }

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start int64) *FakeClock {
	c := &FakeClock{}
	c.now.Store(start)
	return c
}

// Now returns the fake time.
func (c *FakeClock) Now() int64 { return c.now.Load() }

// Advance moves the clock forward by d (a task "taking" d).
func (c *FakeClock) Advance(d time.Duration) { c.now.Add(int64(d)) }

// WaitUntil moves the clock to t if it is behind t.
func (c *FakeClock) WaitUntil(t int64) int64 {
	for {
		now := c.now.Load()
		if now >= t || c.now.CompareAndSwap(now, t) {
			return max(now, t)
		}
	}
}
