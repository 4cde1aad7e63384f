package latency

import (
	"sync"
	"testing"
	"time"
)

func TestRecordNoAllocs(t *testing.T) {
	p := newProbe("p", NewPacer(PacerOptions{}), int64(time.Minute))
	r := p.NewRecorder()
	if n := testing.AllocsPerRun(1000, func() {
		p.Record(1234)
		p.RecordSince(Nanotime())
		r.Record(1234)
		r.RecordSince(Nanotime())
	}); n != 0 {
		t.Fatalf("%v allocations per record, want 0", n)
	}
}

func TestRecordConcurrent(t *testing.T) {
	p := newProbe("p", NewPacer(PacerOptions{}), int64(time.Minute))
	const goroutines, each = 8, 20_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := p.NewRecorder()
			for i := range each {
				if g%2 == 0 {
					p.Record(int64(i))
				} else {
					r.Record(int64(i))
				}
			}
		})
	}
	// Collect while they record, as the progress reporter does.
	for range 10 {
		p.percentileNow(99)
	}
	wg.Wait()
	st := p.take()
	if st.Count != goroutines*each {
		t.Fatalf("count %d, want %d", st.Count, goroutines*each)
	}
	if w := st.Worst(); w < each-1 || w > each+each/1000 {
		t.Fatalf("worst %d, want about %d", w, each-1)
	}
	if st := p.take(); st.Count != 0 {
		t.Fatalf("take did not reset: %d", st.Count)
	}
}
