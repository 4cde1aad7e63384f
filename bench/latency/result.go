package latency

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Result is everything a benchmark measured, ready for encoding/json.
// Latencies are in nanoseconds.
type Result struct {
	Name          string      `json:"name,omitempty"`
	Started       time.Time   `json:"started"`
	Throughput    float64     `json:"throughput_per_s"`
	IntervalNanos int64       `json:"interval_ns"`
	Corrected     bool        `json:"corrected_for_coordinated_omission"`
	Warmup        int64       `json:"warmup_messages"`
	PerRun        int64       `json:"messages_per_run"`
	JitterAboveNs int64       `json:"jitter_threshold_ns,omitempty"`
	Runs          []RunResult `json:"runs"`
	Summary       []Summary   `json:"summary"`
}

// RunResult is one run: its probes in order (end to end first, the
// caller's probes in the order they were added, OS jitter last).
type RunResult struct {
	Run          int          `json:"run"` // from 1
	Sent         int64        `json:"sent"`
	ElapsedNanos int64        `json:"elapsed_ns"`
	Missing      int64        `json:"missing,omitempty"` // end-to-end samples not recorded
	Probes       []ProbeStats `json:"probes"`
}

// ProbeStats is one probe's distribution in one run.
type ProbeStats struct {
	Name        string       `json:"name"`
	Count       int64        `json:"count"`
	Percentiles []Percentile `json:"percentiles"` // ascending; the last is the worst (P = 100)
	Clamped     int64        `json:"clamped,omitempty"`
}

// Percentile is a latency at a percentile; P = 100 is the worst sample.
type Percentile struct {
	P     float64 `json:"p"`
	Nanos int64   `json:"ns"`
}

// At returns the latency at percentile p, if the run had enough samples to
// report it (see PercentilesFor).
func (s ProbeStats) At(p float64) (int64, bool) {
	for _, x := range s.Percentiles {
		if x.P == p {
			return x.Nanos, true
		}
	}
	return 0, false
}

// Worst returns the largest sample.
func (s ProbeStats) Worst() int64 {
	if len(s.Percentiles) == 0 {
		return 0
	}
	return s.Percentiles[len(s.Percentiles)-1].Nanos
}

// Probe returns the named probe's statistics in this run.
func (r RunResult) Probe(name string) (ProbeStats, bool) {
	for _, p := range r.Probes {
		if p.Name == name {
			return p, true
		}
	}
	return ProbeStats{}, false
}

// Summary is one probe across runs, as JLBH prints at the end.
type Summary struct {
	Probe string       `json:"probe"`
	Rows  []SummaryRow `json:"rows"`
}

// SummaryRow is one percentile across runs.
type SummaryRow struct {
	P         float64 `json:"p"`
	Nanos     []int64 `json:"ns"` // one per run
	Variation float64 `json:"variation_pct"`
}

// PercentilesFor returns the percentiles worth printing for count samples,
// ending with 100 (the worst). 50, 90 and 99 are always shown; each further
// nine (99.9, 99.99, ...) once at least ten samples lie beyond it, so it
// is not just the few largest samples. JLBH grows its list the same way,
// wanting a hundred samples beyond; ten lets a 15-second run at 1,000/s
// show its 99.9th percentile, which the EDA benchmark needs.
func PercentilesFor(count int64) []float64 {
	ps := []float64{50, 90, 99}
	tail := 1e-2
	for k := 3; k <= 7; k++ {
		tail /= 10
		if float64(count)*tail < 10 {
			break
		}
		ps = append(ps, math.Round((1-tail)*1e9)/1e7)
	}
	return append(ps, 100)
}

// StatsOf returns the statistics of a histogram recorded outside a
// Harness, such as one merged from the histograms of several processes.
func StatsOf(name string, h *hdr.Histogram) ProbeStats { return statsOf(name, h, 0) }

func statsOf(name string, h *hdr.Histogram, clamped int64) ProbeStats {
	st := ProbeStats{Name: name, Count: h.TotalCount(), Clamped: clamped}
	for _, p := range PercentilesFor(st.Count) {
		v := h.Max()
		if p < 100 {
			v = h.ValueAtPercentile(p)
		}
		if st.Count == 0 {
			v = 0
		}
		st.Percentiles = append(st.Percentiles, Percentile{P: p, Nanos: v})
	}
	return st
}

// Variation is JLBH's measure of how much a percentile moved between
// runs, in percent: 100 * (max - min) / (max + min/2) over the runs given.
// It is 0 when all runs agree and approaches 100 as min/max approaches 0
// (it is JLBH's formula verbatim, kept for comparable numbers, not a
// relative range around the mean). Summarize leaves the first run out
// when there are three or more, as it still carries warm-up effects.
func Variation(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	lo, hi := v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	if hi <= 0 {
		return 0
	}
	return 100 * float64(hi-lo) / (float64(hi) + float64(lo)/2)
}

// Summarize builds one Summary per probe from the runs: a row per
// percentile that every run can report, and the Variation of each row
// over the runs after the first (over all runs when there are fewer than
// three).
func Summarize(runs []RunResult) []Summary {
	if len(runs) == 0 {
		return nil
	}
	var out []Summary
	for _, first := range runs[0].Probes {
		per := make([]ProbeStats, len(runs))
		minCount := int64(math.MaxInt64)
		for i, r := range runs {
			per[i], _ = r.Probe(first.Name)
			minCount = min(minCount, per[i].Count)
		}
		s := Summary{Probe: first.Name}
		for _, p := range PercentilesFor(minCount) {
			row := SummaryRow{P: p, Nanos: make([]int64, len(runs))}
			for i, st := range per {
				row.Nanos[i], _ = st.At(p)
			}
			if len(runs) >= 3 {
				row.Variation = Variation(row.Nanos[1:])
			} else {
				row.Variation = Variation(row.Nanos)
			}
			s.Rows = append(s.Rows, row)
		}
		out = append(out, s)
	}
	return out
}

// WriteJSON writes r as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// SaveJSON writes r as JSON to path, replacing it only once complete.
func (r *Result) SaveJSON(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".latency-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// WriteText writes every run's report and the summary, as Run prints them
// to Options.Out.
func (r *Result) WriteText(w io.Writer) error {
	for i := range r.Runs {
		if err := r.writeRun(w, i, len(r.Runs)); err != nil {
			return err
		}
	}
	return writeSummary(w, r.Summary, len(r.Runs))
}

func (r *Result) writeRun(w io.Writer, i, of int) error {
	run := r.Runs[i]
	var b strings.Builder
	fmt.Fprintf(&b, "---------------------------------- RUN %d of %d ----------------------------------\n", run.Run, of)
	fmt.Fprintf(&b, "Run time: %.3fs, sent %s, correcting for coordinated omission: %v\n",
		float64(run.ElapsedNanos)/1e9, group(run.Sent), r.Corrected)
	fmt.Fprintf(&b, "Target throughput: %s/s = one message every %s us\n",
		group(int64(r.Throughput)), micros(r.IntervalNanos))
	if run.Missing > 0 {
		fmt.Fprintf(&b, "WARNING: %s end-to-end samples missing\n", group(run.Missing))
	}
	for _, p := range run.Probes {
		b.WriteString(probeLine(p))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// probeLine renders one probe as "name (count)  50: x  90: y ... worst: z us".
func probeLine(p ProbeStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-36s", p.Name+" ("+group(p.Count)+")")
	for _, x := range p.Percentiles {
		fmt.Fprintf(&b, "  %s: %s", pctLabel(x.P), micros(x.Nanos))
	}
	b.WriteString(" us")
	if p.Clamped > 0 {
		fmt.Fprintf(&b, " (%s clamped)", group(p.Clamped))
	}
	return b.String()
}

func writeSummary(w io.Writer, sums []Summary, runs int) error {
	var b strings.Builder
	for _, s := range sums {
		fmt.Fprintf(&b, "-------------------------------- SUMMARY (%s) us --------------------------------\n", s.Probe)
		b.WriteString("Percentile")
		for i := 1; i <= runs; i++ {
			fmt.Fprintf(&b, "%12s", "run"+strconv.Itoa(i))
		}
		b.WriteString("   % Variation\n")
		for _, row := range s.Rows {
			fmt.Fprintf(&b, "%-10s", pctLabel(row.P)+":")
			for _, v := range row.Nanos {
				fmt.Fprintf(&b, "%12s", micros(v))
			}
			fmt.Fprintf(&b, "%14.2f\n", row.Variation)
		}
	}
	if len(sums) > 0 {
		b.WriteString(strings.Repeat("-", 82) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pctLabel(p float64) string {
	if p == 100 {
		return "worst"
	}
	return strconv.FormatFloat(p, 'f', -1, 64)
}

// micros renders nanoseconds as microseconds with three significant
// digits (0.078, 1.23, 45.6, 1,230), as JLBH does.
func micros(ns int64) string {
	us := float64(ns) / 1e3
	switch {
	case us < 1:
		return strconv.FormatFloat(us, 'f', 3, 64)
	case us < 10:
		return strconv.FormatFloat(us, 'f', 2, 64)
	case us < 100:
		return strconv.FormatFloat(us, 'f', 1, 64)
	}
	return group(int64(math.Round(us)))
}

// group renders n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
