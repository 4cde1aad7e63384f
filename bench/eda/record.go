package eda

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/offmap/offmap/bench/latency"
)

// plan is the timing every process of a run shares, in nanoseconds of the
// machine-wide monotonic clock (latency.Nanotime): the first scheduled
// send, the warm-up and the runs. A sample counts in the run its message
// was scheduled in; messages scheduled during the warm-up are discarded.
type plan struct {
	Start     int64 `json:"start"`
	Warmup    int64 `json:"warmup"`
	RunLength int64 `json:"run_length"`
	Runs      int   `json:"runs"`
	Instances int   `json:"instances"`
	Interval  int64 `json:"interval"` // between two sends of one instance
}

// end is when the last run ends: no send is scheduled from then on.
func (p plan) end() int64 { return p.Start + p.Warmup + int64(p.Runs)*p.RunLength }

// measured is when the first run begins.
func (p plan) measured() int64 { return p.Start + p.Warmup }

// window returns the run a message scheduled at t counts in, or -1.
func (p plan) window(t int64) int {
	d := t - p.Start - p.Warmup
	if d < 0 {
		return -1
	}
	if r := int(d / p.RunLength); r < p.Runs {
		return r
	}
	return -1
}

// first is instance i's first send: instances are spread evenly over an
// interval, so that the load is smooth.
func (p plan) first(i int) int64 { return p.Start + int64(i)*p.Interval/int64(p.Instances) }

// sends is how many messages instance i sends in the whole plan.
func (p plan) sends(i int) int64 {
	span := p.end() - p.first(i)
	if span <= 0 {
		return 0
	}
	return (span + p.Interval - 1) / p.Interval
}

// Probes, in report order: end to end from the scheduled send (corrected
// for coordinated omission), end to end from the actual send
// (uncorrected), and the time from the scheduled send to each service.
const (
	probeEndToEnd = iota
	probeUncorrected
	probeHop1
	probes = probeHop1 + Services
)

// ProbeEndToEnd and ProbeUncorrected name the end-to-end probes in results.
const (
	ProbeEndToEnd    = "end to end"
	ProbeUncorrected = "end to end (uncorrected)"
)

func probeName(p int) string {
	switch p {
	case probeEndToEnd:
		return ProbeEndToEnd
	case probeUncorrected:
		return ProbeUncorrected
	}
	return fmt.Sprintf("service %d (from scheduled send)", p-probeHop1+1)
}

// Histograms keep values up to a minute, end to end to 3 significant
// digits and per service to 2 (1%): the ten times smaller histograms of
// the five hop probes stay in cache when a loop records millions of
// samples a second.
const (
	highestLatency = int64(60e9)
	sigFigs        = 3
	hopSigFigs     = 2
)

func newHist(probe int) *hdr.Histogram {
	if probe >= probeHop1 {
		return hdr.New(1, highestLatency, hopSigFigs)
	}
	return hdr.New(1, highestLatency, sigFigs)
}

// recorder holds a histogram per run and probe in shards; each recording
// goroutine should use a shard of its own (event loops do), or Record picks
// one at random.
type recorder struct {
	plan   plan
	shards []recShard
}

type recShard struct {
	mu   sync.Mutex
	h    [][probes]*hdr.Histogram // [run][probe], made for every run at a probe's first sample
	lost int64                    // samples past highestLatency
	_    [64]byte
}

func newRecorder(p plan, shards int) *recorder {
	r := &recorder{plan: p, shards: make([]recShard, shards)}
	for i := range r.shards {
		r.shards[i].h = make([][probes]*hdr.Histogram, p.Runs)
	}
	return r
}

// record adds a sample of probe for a message scheduled at scheduled.
// shard < 0 picks a shard at random.
//
// The first sample of a probe, normally in the warm-up, makes its
// histograms for every run: a run that begins does not allocate some
// hundreds of kilobytes in the middle of the loops' work and set off a
// garbage collection there.
func (r *recorder) record(shard, probe int, scheduled, ns int64) {
	if shard < 0 {
		shard = int(rand.Uint32() % uint32(len(r.shards)))
	}
	s := &r.shards[shard]
	s.mu.Lock()
	if s.h[0][probe] == nil {
		for run := range s.h {
			s.h[run][probe] = newHist(probe)
		}
	}
	run := r.plan.window(scheduled)
	if run < 0 {
		s.mu.Unlock()
		return
	}
	h := s.h[run][probe]
	if ns < 1 {
		ns = 1
	}
	if ns > highestLatency {
		ns, s.lost = highestLatency, s.lost+1
	}
	_ = h.RecordValue(ns)
	s.mu.Unlock()
}

// merged returns the histograms of all shards, per run and probe.
func (r *recorder) merged() [][probes]*hdr.Histogram {
	out := make([][probes]*hdr.Histogram, r.plan.Runs)
	for run := range out {
		for p := range probes {
			out[run][p] = newHist(p)
		}
	}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for run := range s.h {
			for p, h := range s.h[run] {
				if h != nil {
					out[run][p].Merge(h)
				}
			}
		}
		s.mu.Unlock()
	}
	return out
}

// encodeHists packs histograms for another process (compressed HdrHistogram
// encoding, base64).
func encodeHists(hs [][probes]*hdr.Histogram) ([][probes]string, error) {
	out := make([][probes]string, len(hs))
	for run := range hs {
		for p, h := range hs[run] {
			b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
			if err != nil {
				return nil, err
			}
			out[run][p] = base64.StdEncoding.EncodeToString(b)
		}
	}
	return out, nil
}

// mergeEncoded adds histograms packed by encodeHists into hs.
func mergeEncoded(hs [][probes]*hdr.Histogram, enc [][probes]string) error {
	if len(enc) != len(hs) {
		return fmt.Errorf("eda: %d runs of histograms, want %d", len(enc), len(hs))
	}
	for run := range enc {
		for p, s := range enc[run] {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return err
			}
			h, err := hdr.Decode(b)
			if err != nil {
				return err
			}
			hs[run][p].Merge(h)
		}
	}
	return nil
}

// runResults turns merged histograms into the harness's result types.
func runResults(hs [][probes]*hdr.Histogram, p plan) []latency.RunResult {
	runs := make([]latency.RunResult, len(hs))
	for run := range hs {
		rr := latency.RunResult{Run: run + 1, ElapsedNanos: p.RunLength}
		for _, pr := range recordedProbes(hs) {
			rr.Probes = append(rr.Probes, latency.StatsOf(probeName(pr), hs[run][pr]))
		}
		rr.Sent = rr.Probes[probeEndToEnd].Count
		runs[run] = rr
	}
	return runs
}

// recordedProbes lists the probes to report: a service probe with no
// sample in any run was not recorded (NoServiceProbes) and is left out
// rather than reported as zeros.
func recordedProbes(hs [][probes]*hdr.Histogram) []int {
	var out []int
	for pr := range probes {
		if pr < probeHop1 || slices.ContainsFunc(hs, func(run [probes]*hdr.Histogram) bool { return run[pr].TotalCount() > 0 }) {
			out = append(out, pr)
		}
	}
	return out
}
