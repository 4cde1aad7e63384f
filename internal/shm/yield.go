package shm

import (
	"runtime"
	"time"
	_ "unsafe" // go:linkname
)

// YieldEvery is how often a goroutine spinning on a CPU of its own lets
// the others of its P run.
const YieldEvery = time.Millisecond

// SpinYield spaces out the yields of a spin loop. runtime.Gosched is not
// free for a spinner: every call also wakes an idle P's thread to look for
// work (wakep), and on a machine with no idle CPU that thread is queued on
// the spinner's own CPU, which the kernel then takes from the spinner for
// as long as the woken thread runs, a scheduler slice at worst. Yielding
// once per YieldEvery instead of every 64 polls cut a spinning reader's
// futex calls by four and its context switches by half on a 2-CPU machine
// (docs/BENCHMARKS.md, "Who takes the CPU"), and still keeps the
// goroutines sharing the P running, and the runtime from preempting the
// spinner (it does after 10 ms). The zero value is ready; one per spin
// loop, not shared.
type SpinYield struct {
	polls  int
	next   int64
	yields int // for tests
}

// Poll is called once per poll of the loop; now and then it reads the
// clock and, once per YieldEvery, yields.
func (s *SpinYield) Poll() {
	s.polls++
	if s.polls&63 != 0 {
		return
	}
	now := nanotime()
	if s.next == 0 {
		s.next = now + int64(YieldEvery)
		return
	}
	if now >= s.next {
		runtime.Gosched()
		s.yields++
		s.next = now + int64(YieldEvery)
	}
}

//go:linkname nanotime runtime.nanotime
func nanotime() int64
