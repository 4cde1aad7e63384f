package latency

import (
	"sync/atomic"
	"time"
)

// jitterWindow is how long the jitter goroutine samples at a stretch when
// JitterDuty < 1.
const jitterWindow = 10 * time.Millisecond

// startJitter starts the jitter goroutine: it does nothing but read the
// clock, so any gap between two readings longer than the threshold is time
// the goroutine was not running (descheduled by the OS, stopped by the Go
// runtime for GC or preemption), the noise floor every other probe sits
// on.
func (h *Harness) startJitter() (stop func()) {
	var quit atomic.Bool
	done := make(chan struct{})
	rec := h.jitter.NewRecorder()
	c, thr := h.clock, int64(h.o.JitterThreshold)
	idle := time.Duration(float64(jitterWindow) * (1 - h.o.JitterDuty) / h.o.JitterDuty)
	go func() {
		defer close(done)
		last := c.Now()
		windowStart := last
		for !quit.Load() {
			for range 1000 {
				now := c.Now()
				if now-last > thr {
					rec.Record(now - last)
				}
				last = now
			}
			if idle > 0 && last-windowStart >= int64(jitterWindow) {
				time.Sleep(idle) // not a pause: restart the window after it
				last = c.Now()
				windowStart = last
			}
		}
	}()
	return func() { quit.Store(true); <-done }
}
