package latency

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The cost of recording: what a probe adds to the code it measures.

func BenchmarkProbeRecord(b *testing.B) {
	p := newProbe("p", NewPacer(PacerOptions{}), int64(time.Minute))
	for i := 0; b.Loop(); i++ {
		p.Record(int64(i & 0xffff))
	}
}

func BenchmarkProbeRecordParallel(b *testing.B) {
	p := newProbe("p", NewPacer(PacerOptions{}), int64(time.Minute))
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			p.Record(int64(i & 0xffff))
		}
	})
}

func BenchmarkRecorderRecord(b *testing.B) {
	r := newProbe("p", NewPacer(PacerOptions{}), int64(time.Minute)).NewRecorder()
	for i := 0; b.Loop(); i++ {
		r.Record(int64(i & 0xffff))
	}
}

func BenchmarkRecordSince(b *testing.B) {
	p := newProbe("p", NewPacer(PacerOptions{}), int64(time.Minute))
	start := Nanotime()
	for b.Loop() {
		p.RecordSince(start)
	}
}

func BenchmarkNanotime(b *testing.B) {
	for b.Loop() {
		Nanotime()
	}
}

func BenchmarkTimeSince(b *testing.B) {
	t0 := time.Now()
	for b.Loop() {
		_ = time.Since(t0)
	}
}

// How late a 1 ms wait (one sender at 1,000 messages a second) returns,
// and the CPU it costs, by strategy: p50 and p99 lateness and CPU time per
// wait in ns as custom metrics.
func BenchmarkPacerWait(b *testing.B) {
	for _, bc := range []struct {
		name string
		wait func(due int64)
	}{
		{"time.Sleep", func(due int64) { time.Sleep(time.Duration(due - Nanotime())) }},
		{"gotimer-spin0", NewPacer(PacerOptions{GoTimer: true}).waitFn()},
		{"timerfd-spin0", NewPacer(PacerOptions{}).waitFn()},
		{"timerfd-spin20us", NewPacer(PacerOptions{Spin: 20 * time.Microsecond}).waitFn()},
		{"timerfd-spin100us", NewPacer(PacerOptions{Spin: 100 * time.Microsecond}).waitFn()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var late []int64
			m, err := StartCPU()
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				due := Nanotime() + int64(time.Millisecond)
				bc.wait(due)
				late = append(late, Nanotime()-due)
			}
			u, err := m.Read()
			if err != nil {
				b.Fatal(err)
			}
			slices.Sort(late)
			b.ReportMetric(float64(late[len(late)/2]), "p50-late-ns")
			b.ReportMetric(float64(late[len(late)*99/100]), "p99-late-ns")
			b.ReportMetric(float64(u.SelfNanos)/float64(len(late)), "cpu-ns/wait")
		})
	}
}

func (p *Pacer) waitFn() func(int64) { return func(due int64) { p.WaitUntil(due) } }

func BenchmarkScheduleNext(b *testing.B) {
	b.Run("staggered-1000", func(b *testing.B) {
		s := NewStaggered(1000, 0, time.Millisecond)
		for b.Loop() {
			s.Next()
		}
	})
	b.Run("heap-1000", func(b *testing.B) {
		s := &Schedule{}
		for i := range 1000 {
			s.Add(int64(i), time.Duration(1_000_000+i))
		}
		for b.Loop() {
			s.Next()
		}
	})
}

// The harness's own cost per message: an empty task that records its
// end-to-end sample, at a rate too high to keep up with, so the pacer
// never waits and ns/op is the loop (clock reads, pacing check, record).
func BenchmarkHarnessLoop(b *testing.B) {
	h, err := New(Options{Throughput: 1e9, RunCount: int64(b.N), Runs: 1})
	if err != nil {
		b.Fatal(err)
	}
	e2e := h.EndToEnd()
	b.ResetTimer()
	if _, err := h.Run(context.Background(), func(start int64) { e2e.RecordSince(start) }); err != nil {
		b.Fatal(err)
	}
}

// The harness's noise floor: an empty task at a fixed rate, so the
// end-to-end latency is only how late the pacer released it, plus the
// CPU the harness used as % of one core. Run with -benchtime Nx to set
// the messages per rate.
func BenchmarkHarnessFloor(b *testing.B) {
	for _, rate := range []float64{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("rate=%g", rate), func(b *testing.B) {
			h, err := New(Options{Throughput: rate, RunCount: int64(b.N), Runs: 1})
			if err != nil {
				b.Fatal(err)
			}
			e2e := h.EndToEnd()
			m, err := StartCPU()
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			res, err := h.Run(context.Background(), func(start int64) { e2e.RecordSince(start) })
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			u, _ := m.Read()
			st := res.Runs[0].Probes[0]
			for _, p := range []float64{50, 99, 99.9} {
				if v, ok := st.At(p); ok {
					b.ReportMetric(float64(v), fmt.Sprintf("p%g-ns", p))
				}
			}
			b.ReportMetric(float64(st.Worst()), "worst-ns")
			b.ReportMetric(u.Percent, "cpu-%")
		})
	}
}
