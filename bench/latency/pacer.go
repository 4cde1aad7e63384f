package latency

import (
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// DefaultSpin is the spin window of a Pacer made by the harness: the
// wake-up from a timer sleep is late by 25 us typically and 150 us at the
// 99th percentile on an idle 2-core VM, and a late release counts as
// latency when correcting for coordinated omission.
const DefaultSpin = 100 * time.Microsecond

// minSleep: below this, a timer sleep costs more than it saves.
const minSleep = 20 * time.Microsecond

// Pacer is the default Clock: it waits for a deadline precisely without a
// Go timer per wait. Go's time.Sleep wakes on the netpoller's millisecond
// tick when the process is idle (time.Sleep(125us) takes about 1.1 ms), so
// the Pacer sleeps on a Linux timerfd armed for the absolute deadline minus
// the spin window, which wakes the netpoller at once, then spins on the
// clock for the rest (yielding once a millisecond in a long spin).
//
// The timerfd wakes the goroutine through the netpoller, which a process
// whose Ps are all busy polls only when one goes idle or, at worst, every
// 10 ms (sysmon). Go timers are checked at every scheduling point, so in
// a saturated process GoTimer is the more punctual choice.
//
// A Pacer's WaitUntil is for one goroutine at a time (it owns one timer);
// Now is safe anywhere. To pace many senders from one goroutine, see
// Schedule and Drive.
type Pacer struct {
	spin    int64
	goTimer bool
	t       sleeper
}

// PacerOptions tune a Pacer between precision and CPU.
type PacerOptions struct {
	// Spin is how long before the deadline the Pacer stops sleeping and
	// spins; 0 never spins (cheapest, least precise).
	Spin time.Duration
	// GoTimer sleeps with time.Sleep instead of a timerfd: on the 2-core
	// VM of docs/BENCHMARKS.md a wake costs less CPU (about 45 us against
	// 60 us) but returns up to 1 ms late unless Spin covers it.
	GoTimer bool
}

// NewPacer returns a Pacer. It opens its timer on first use; Close
// releases it.
func NewPacer(o PacerOptions) *Pacer {
	return &Pacer{spin: int64(max(o.Spin, 0)), goTimer: o.GoTimer}
}

// Now returns Nanotime().
func (p *Pacer) Now() int64 { return Nanotime() }

// WaitUntil returns once Nanotime() >= t; it returns the time it woke.
func (p *Pacer) WaitUntil(t int64) int64 {
	now := Nanotime()
	if now >= t {
		return now
	}
	if t-now > p.spin+int64(minSleep) {
		if p.goTimer {
			time.Sleep(time.Duration(t - p.spin - now))
		} else {
			p.t.sleepUntil(t - p.spin)
		}
	}
	var yield shm.SpinYield
	for {
		now = Nanotime()
		if now >= t {
			return now
		}
		yield.Poll()
	}
}

// Close releases the Pacer's timer; a later wait opens a new one.
func (p *Pacer) Close() error { return p.t.close() }
