package eda

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/bench/latency"
)

// BenchmarkChain measures the CPU cost of one message crossing a whole
// chain (six appends, six reads, five counter adds) in an event loop that
// serves many instances, without pacing: what decides how many instances
// two cores can carry. One op is one message.
func BenchmarkChain(b *testing.B) {
	for _, n := range []int{1, 100, 500} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			c, _ := openWholeChains(b, n, 1)
			c.plan = plan{Start: 0, Warmup: int64(time.Hour), RunLength: int64(time.Hour), Runs: 1, Instances: n, Interval: int64(time.Millisecond)}
			c.rec = newRecorder(c.plan, 1)
			l := newLoop(c, 0, 0)
			for _, in := range c.instances {
				l.addSender(in)
				for k := 0; k <= Services; k++ {
					if err := l.addConsumer(in, k, false); err != nil {
						b.Fatal(err)
					}
				}
			}
			l.formGroups()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in := l.senders[i%n]
				if prefetching {
					l.prefetchAhead(in)
				}
				if err := c.send(in, int64(i), l.buf); err != nil {
					b.Fatal(err)
				}
				if err := l.follow(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var prefetching = true

func BenchmarkChainNoPrefetch(b *testing.B) {
	prefetching = false
	defer func() { prefetching = true }()
	BenchmarkChain(b)
}

// openWholeChains opens n instances with every role in this process (a
// sender, the five services and a receiver each), on queues in a
// temporary directory closed when the test ends.
func openWholeChains(tb testing.TB, n int, seed uint32) (*chain, *server) {
	tb.Helper()
	dir := tb.TempDir()
	counters, err := openCounters(dir, n)
	if err != nil {
		tb.Fatal(err)
	}
	tr := &Queues{Dir: dir}
	tb.Cleanup(func() {
		tr.Close()
		counters.Close()
	})
	c := &chain{counters: counters}
	r := role{Instances: allInstances(n), Senders: true, Services: []int{1, 2, 3, 4, 5}, Receivers: true}
	s, err := open(c, tr, seed, r)
	if err != nil {
		tb.Fatal(err)
	}
	return c, s
}

// BenchmarkParkNaps measures what the park loop pays Go for its naps
// alone: goroutines that each sleep 125 us (1/8 of 1 ms) in a loop, as
// the park loop's services do on an empty topic, with no queue. One op is
// one wake-up; cpu-ns/wake is the CPU of the whole process per wake-up,
// wakes/s/goroutine how often each one got to poll. Run it with -cpu 1,2
// to see what a second P costs.
func BenchmarkParkNaps(b *testing.B) {
	for _, n := range []int{100, 600, 1200} {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			var wakes atomic.Int64
			var wg sync.WaitGroup
			meter, err := latency.StartCPU()
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for wakes.Add(1) <= int64(b.N) {
						time.Sleep(125 * time.Microsecond)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			use, err := meter.Read()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(use.SelfNanos)/float64(b.N), "cpu-ns/wake")
			b.ReportMetric(float64(b.N)/(float64(use.WallNanos)/1e9)/float64(n), "wakes/s/goroutine")
		})
	}
}
