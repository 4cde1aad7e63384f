package latency_test

import (
	"context"
	"fmt"
	"time"

	"github.com/offmap/offmap/bench/latency"
)

// A task that takes 100 us, except every 250th call, which takes 5 ms, at
// 1,000 calls a second. A fake clock makes the run instant and exact; a
// real benchmark leaves Clock unset and sets Out to print the reports.
func Example() {
	for _, uncorrected := range []bool{false, true} {
		clock := latency.NewFakeClock(0)
		h, err := latency.New(latency.Options{
			Throughput: 1000, RunCount: 1000, Runs: 1,
			Uncorrected: uncorrected, Clock: clock,
		})
		if err != nil {
			panic(err)
		}
		e2e, calls := h.EndToEnd(), 0
		res, err := h.Run(context.Background(), func(start int64) {
			if calls++; calls%250 == 0 {
				clock.Advance(5 * time.Millisecond)
			} else {
				clock.Advance(100 * time.Microsecond)
			}
			e2e.RecordSince(start)
		})
		if err != nil {
			panic(err)
		}
		st, _ := res.Runs[0].Probe(latency.EndToEndName)
		p99, _ := st.At(99)
		fmt.Printf("corrected %-5v p99 %v, worst %v\n", res.Corrected,
			time.Duration(p99).Round(time.Microsecond), time.Duration(st.Worst()).Round(time.Microsecond))
	}
	// Output:
	// corrected true  p99 2.302ms, worst 5.001ms
	// corrected false p99 100µs, worst 5.001ms
}
