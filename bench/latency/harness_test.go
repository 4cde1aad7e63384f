package latency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallOnce runs 10,000 messages at 1,000/s on a fake clock; the task takes
// no time except call 5,000, which stalls for one second.
func stallOnce(t *testing.T, uncorrected bool) *Result {
	t.Helper()
	clock := NewFakeClock(1e12)
	h, err := New(Options{Throughput: 1000, RunCount: 10_000, Runs: 1, Clock: clock, Uncorrected: uncorrected})
	if err != nil {
		t.Fatal(err)
	}
	e2e, i := h.EndToEnd(), 0
	res, err := h.Run(context.Background(), func(start int64) {
		if i++; i == 5000 {
			clock.Advance(time.Second)
		}
		e2e.RecordSince(start)
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Coordinated omission: corrected, the stall is charged to the 1,000
// messages it delayed (latencies 1 s, 999 ms, ..., 1 ms); uncorrected, only
// to the one that stalled.
func TestCoordinatedOmission(t *testing.T) {
	within := func(got, want int64) bool { return got >= want && got <= want+want/1000 }
	for _, tc := range []struct {
		uncorrected bool
		p90, p99    int64
		elapsed     int64
		description string
	}{
		{false, 0, 900e6, 10e9 - 1e6, "corrected: 10% of samples carry the stall"},
		{true, 0, 0, 11e9 - 2e6, "uncorrected: one sample carries it, the schedule slips 1 s"},
	} {
		res := stallOnce(t, tc.uncorrected)
		run := res.Runs[0]
		e2e, _ := run.Probe(EndToEndName)
		p90, _ := e2e.At(90)
		p99, _ := e2e.At(99)
		if e2e.Count != 10_000 || p90 != tc.p90 || !within(p99, tc.p99) || !within(e2e.Worst(), 1e9) {
			t.Errorf("%s: count %d p90 %d p99 %d worst %d", tc.description, e2e.Count, p90, p99, e2e.Worst())
		}
		if run.ElapsedNanos != tc.elapsed {
			t.Errorf("%s: elapsed %d, want %d", tc.description, run.ElapsedNanos, tc.elapsed)
		}
		if res.Corrected == tc.uncorrected {
			t.Errorf("Result.Corrected = %v", res.Corrected)
		}
	}
}

// The same on the real clock and pacer, with generous bounds: a 150 ms
// stall at 1,000/s delays about 150 of 600 messages.
func TestCoordinatedOmissionRealClock(t *testing.T) {
	p90 := func(uncorrected bool) int64 {
		h, err := New(Options{Throughput: 1000, RunCount: 600, Runs: 1, Uncorrected: uncorrected})
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		res, err := h.Run(context.Background(), func(start int64) {
			if i++; i == 300 {
				time.Sleep(150 * time.Millisecond)
			}
			h.EndToEnd().RecordSince(start)
		})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := res.Runs[0].Probes[0].At(90)
		return v
	}
	corrected, uncorrected := p90(false), p90(true)
	t.Logf("p90 corrected %v, uncorrected %v", time.Duration(corrected), time.Duration(uncorrected))
	if corrected < int64(50*time.Millisecond) || uncorrected >= int64(50*time.Millisecond) {
		t.Fatalf("p90 corrected %v, uncorrected %v: want >= 50ms and < 50ms",
			time.Duration(corrected), time.Duration(uncorrected))
	}
}

// Counts are exact, the warm-up is discarded, and end-to-end samples
// recorded asynchronously by a consumer goroutine are all waited for.
func TestProbeCountsExact(t *testing.T) {
	h, err := New(Options{Throughput: 20_000, WarmupCount: 500, RunCount: 2000, Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, b, e2e := h.Probe("a"), h.Probe("b"), h.EndToEnd()
	if h.Probe("a") != a || h.Probe(EndToEndName) != e2e {
		t.Fatal("Probe does not return the existing probe")
	}
	queue := make(chan int64, 1024)
	var consumer sync.WaitGroup
	consumer.Go(func() {
		rec := e2e.NewRecorder()
		for start := range queue {
			rec.RecordSince(start)
		}
	})
	res, err := h.Run(context.Background(), func(start int64) {
		a.RecordSince(start)
		b.Record(1)
		b.Record(2)
		queue <- start
	})
	close(queue)
	consumer.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 || res.Warmup != 500 || res.PerRun != 2000 {
		t.Fatalf("runs %d, warm-up %d, per run %d", len(res.Runs), res.Warmup, res.PerRun)
	}
	for _, run := range res.Runs {
		want := map[string]int64{EndToEndName: 2000, "a": 2000, "b": 4000}
		if len(run.Probes) != len(want) || run.Sent != 2000 || run.Missing != 0 {
			t.Fatalf("run %d: %d probes, sent %d, missing %d", run.Run, len(run.Probes), run.Sent, run.Missing)
		}
		for _, p := range run.Probes {
			if p.Count != want[p.Name] {
				t.Errorf("run %d probe %q: count %d, want %d", run.Run, p.Name, p.Count, want[p.Name])
			}
		}
		if names := []string{run.Probes[0].Name, run.Probes[1].Name, run.Probes[2].Name}; !reflect.DeepEqual(names, []string{EndToEndName, "a", "b"}) {
			t.Errorf("probe order %q", names)
		}
	}
}

func TestMissingSamples(t *testing.T) {
	h, err := New(Options{Throughput: 1e6, RunCount: 100, Runs: 2, Clock: NewFakeClock(1), DrainTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	res, err := h.Run(context.Background(), func(start int64) {
		if i++; i%2 == 0 {
			h.EndToEnd().RecordSince(start)
		}
	})
	if !errors.Is(err, ErrMissingSamples) || len(res.Runs) != 2 || res.Runs[0].Missing != 50 || res.Runs[1].Missing != 50 {
		t.Fatalf("err %v, runs %+v", err, res.Runs)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := New(Options{Throughput: 1000, RunCount: 100, Runs: 5, Clock: NewFakeClock(1)})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	res, err := h.Run(ctx, func(start int64) {
		if i++; i == 150 { // half-way through run 2
			cancel()
		}
		h.EndToEnd().RecordSince(start)
	})
	if !errors.Is(err, context.Canceled) || len(res.Runs) != 1 || len(res.Summary) != 1 {
		t.Fatalf("err %v, %d runs, %d summaries", err, len(res.Runs), len(res.Summary))
	}
}

func TestStartedTwice(t *testing.T) {
	h, err := New(Options{Throughput: 1000, RunCount: 1, Runs: 1, Clock: NewFakeClock(1)})
	if err != nil {
		t.Fatal(err)
	}
	task := func(start int64) { h.EndToEnd().RecordSince(start) }
	if _, err := h.Run(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(context.Background(), task); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Run: %v, want ErrStarted", err)
	}
	defer func() {
		if r, _ := recover().(error); !errors.Is(r, ErrStarted) {
			t.Fatalf("Probe after Run: panic %v, want ErrStarted", r)
		}
	}()
	h.Probe("late")
}

func TestOptionsErrors(t *testing.T) {
	for _, o := range []Options{
		{RunCount: 1},
		{Throughput: -1, RunCount: 1},
		{Throughput: 1000},
		{Throughput: 1000, RunCount: 1, RunDuration: time.Second},
		{Throughput: 1000, RunDuration: time.Microsecond}, // rounds to 0 messages
		{Throughput: 1000, RunCount: 1, WarmupCount: 1, WarmupDuration: time.Second},
		{Throughput: 1000, RunCount: 1, Runs: -1},
		{Throughput: 1000, RunCount: 1, JitterDuty: 2},
	} {
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("New(%+v): %v, want ErrOptions", o, err)
		}
	}
	h, err := New(Options{Throughput: 1000, RunDuration: 2 * time.Second, WarmupDuration: 500 * time.Millisecond})
	if err != nil || h.perRun != 2000 || h.warmup != 500 || h.o.Runs != 3 {
		t.Fatalf("durations to counts: %v, per run %d, warm-up %d", err, h.perRun, h.warmup)
	}
}

func TestClamped(t *testing.T) {
	h, err := New(Options{Throughput: 1000, RunCount: 3, Runs: 1, Clock: NewFakeClock(1), MaxLatency: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	samples := []int64{-5, 2e9, 100}
	i := 0
	res, err := h.Run(context.Background(), func(int64) { h.EndToEnd().Record(samples[i]); i++ })
	if err != nil {
		t.Fatal(err)
	}
	e2e := res.Runs[0].Probes[0]
	if e2e.Clamped != 2 || e2e.Count != 3 || e2e.Worst() < 1e9 || e2e.Worst() > 1e9+1e6 {
		t.Fatalf("clamped %d, count %d, worst %d", e2e.Clamped, e2e.Count, e2e.Worst())
	}
}

// The jitter goroutine sees a jump of the clock as a pause.
func TestJitter(t *testing.T) {
	clock := NewFakeClock(1)
	h, err := New(Options{Throughput: 1000, RunCount: 20, Runs: 1, Clock: clock,
		JitterThreshold: 10 * time.Millisecond, JitterDuty: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	res, err := h.Run(context.Background(), func(start int64) {
		if i++; i == 10 {
			time.Sleep(20 * time.Millisecond) // let the jitter goroutine read the clock
			clock.Advance(50 * time.Millisecond)
			time.Sleep(20 * time.Millisecond)
		}
		h.EndToEnd().RecordSince(start)
	})
	if err != nil {
		t.Fatal(err)
	}
	probes := res.Runs[0].Probes
	j := probes[len(probes)-1]
	if j.Name != JitterName || j.Count < 1 || j.Worst() < int64(50*time.Millisecond) || res.JitterAboveNs != 1e7 {
		t.Fatalf("jitter probe %+v", j)
	}
}

func TestReportsAndJSON(t *testing.T) {
	var out, progress bytes.Buffer
	h, err := New(Options{Name: "demo", Throughput: 2000, RunCount: 400, Runs: 3, WarmupCount: 100,
		Out: &out, Progress: &progress, ProgressEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hop := h.Probe("hop 1")
	res, err := h.Run(context.Background(), func(start int64) {
		hop.Record(100)
		h.EndToEnd().RecordSince(start)
	})
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"RUN 1 of 3", "RUN 3 of 3", "end to end (400)", "hop 1 (400)",
		"50: ", "99: ", "worst: ", "SUMMARY (end to end)", "SUMMARY (hop 1)", "% Variation"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	var again bytes.Buffer
	if err := res.WriteText(&again); err != nil || again.String() != text {
		t.Errorf("WriteText differs from the report printed during Run:\n%s", again.String())
	}
	if p := progress.String(); !strings.Contains(p, "sent ") || !strings.Contains(p, "p99") {
		t.Errorf("progress lines: %q", p)
	}

	path := filepath.Join(t.TempDir(), "r.json")
	if err := res.SaveJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, res) {
		t.Fatalf("JSON round trip differs:\n%+v\n%+v", back, *res)
	}
	if !strings.Contains(string(b), `"p": 99`) || !strings.Contains(string(b), `"variation_pct"`) {
		t.Fatalf("JSON lacks fields:\n%s", b)
	}
}
