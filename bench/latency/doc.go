// Package latency is a latency benchmark harness in the manner of
// OpenHFT's JLBH: it runs a task at a fixed throughput and reports the
// distribution of its latencies, corrected for coordinated omission, with
// named probes for points inside the task.
//
// # Model
//
// A Harness calls the task once per scheduled start, one message every
// 1/Throughput seconds: first a warm-up whose samples are discarded, then
// Runs runs of RunCount messages (or RunDuration). The task receives its
// scheduled start time and records the end-to-end latency itself on
// EndToEnd(), once per call, from any goroutine: a producer/consumer
// benchmark records it in the consumer. Calls never overlap; after each
// run the harness waits for samples still in flight.
//
// Coordinated omission: a load generator that waits for a slow call before
// sending the next stops asking while the system is stalled, and a naive
// measurement then misses the stall in every message it delayed. Here the
// schedule advances by a fixed gap; when the harness is late it calls the
// task at once, with the time the message was due, so the stall is charged
// to every delayed message. Options.Uncorrected measures from the actual
// start and lets the schedule slip instead, to show the difference.
//
// # Probes, jitter, reports
//
// Probe(name) adds a histogram the task records on at points inside itself
// (for a chain: each hop). Recording is safe from any goroutine, allocates
// nothing and costs a few tens of nanoseconds (a shard chosen at random,
// locked for the record only, merged later). Histograms are HDR histograms
// (github.com/HdrHistogram/hdrhistogram-go) with 3 significant digits.
//
// With JitterThreshold set, a goroutine that only reads the clock records
// every gap above the threshold as the "OS jitter" probe: the pauses any
// goroutine suffers from the OS and the Go runtime.
//
// After each run, Options.Out gets one line per probe: count, percentiles
// 50/90/99 and more as samples allow (PercentilesFor), and the worst; at
// the end, a summary per probe across runs with JLBH's % variation
// (Variation). Run returns the same as a Result for encoding/json
// (Result.SaveJSON). Options.Progress gets a line every second with the
// messages sent and the current p99.
//
// # Pacing and clocks
//
// Times are CLOCK_MONOTONIC nanoseconds (Nanotime), comparable across
// processes. The default Clock is a Pacer, which waits on a timerfd and
// spins the last stretch, because Go's time.Sleep oversleeps short waits by
// up to a millisecond. For many senders (a thousand instances at 1,000
// messages a second each), one goroutine can pace them all with a
// Schedule and Drive. A FakeClock makes tests deterministic.
//
// CPUMeter reports the CPU time of this process and of child processes
// over a window, as a percentage of one core.
//
// # Example
//
//	h, err := latency.New(latency.Options{
//		Throughput: 10_000, WarmupDuration: time.Second,
//		Runs: 5, RunDuration: 10 * time.Second,
//		Out: os.Stdout, Progress: os.Stderr,
//	})
//	if err != nil { ... }
//	e2e, put := h.EndToEnd(), h.Probe("put")
//	res, err := h.Run(ctx, func(start int64) {
//		t := h.Now()
//		m.Put(key, value)
//		put.RecordSince(t)     // the call alone
//		e2e.RecordSince(start) // from the scheduled start
//	})
//	if err != nil { ... }
//	err = res.SaveJSON("latency.json")
//
// The package is for Linux; the pacer falls back to time.Sleep elsewhere.
package latency
