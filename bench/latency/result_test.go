package latency

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestVariation(t *testing.T) {
	for _, tc := range []struct {
		v    []int64
		want float64
	}{
		// The 99.9 row of JLBH's published summary, runs 2-5: 76.92 (it
		// printed 76.71 from unrounded values).
		{[]int64{130, 620, 780, 130}, 100 * 650 / (780 + 65.0)},
		{[]int64{5, 5, 5}, 0},
		{[]int64{0, 0}, 0},
		{[]int64{10, 0}, 100},
		{[]int64{100, 110, 100}, 100 * 10 / (110 + 50.0)},
		{nil, 0},
	} {
		if got := Variation(tc.v); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Variation(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func stats(name string, count int64, p50, worst int64) ProbeStats {
	return ProbeStats{Name: name, Count: count, Percentiles: []Percentile{
		{50, p50}, {90, p50}, {99, p50}, {100, worst}}}
}

func TestSummarizeExcludesFirstRun(t *testing.T) {
	runs := []RunResult{
		{Run: 1, Probes: []ProbeStats{stats("e", 10, 1000, 5000)}}, // warm-up effects
		{Run: 2, Probes: []ProbeStats{stats("e", 10, 100, 200)}},
		{Run: 3, Probes: []ProbeStats{stats("e", 10, 110, 200)}},
		{Run: 4, Probes: []ProbeStats{stats("e", 10, 100, 200)}},
	}
	s := Summarize(runs)
	if len(s) != 1 || s[0].Probe != "e" || len(s[0].Rows) != 4 {
		t.Fatalf("summary %+v", s)
	}
	p50, worst := s[0].Rows[0], s[0].Rows[3]
	if !reflect.DeepEqual(p50.Nanos, []int64{1000, 100, 110, 100}) || math.Abs(p50.Variation-6.25) > 1e-9 {
		t.Errorf("p50 row %+v, want variation 6.25 without run 1", p50)
	}
	if worst.P != 100 || worst.Variation != 0 {
		t.Errorf("worst row %+v", worst)
	}
	// With two runs, both count.
	s = Summarize(runs[:2])
	if want := Variation([]int64{1000, 100}); s[0].Rows[0].Variation != want {
		t.Errorf("two runs: variation %v, want %v", s[0].Rows[0].Variation, want)
	}
}

// The summary keeps only percentiles every run can report.
func TestSummarizeCommonPercentiles(t *testing.T) {
	big := ProbeStats{Name: "e", Count: 20_000, Percentiles: []Percentile{{50, 1}, {90, 2}, {99, 3}, {99.9, 4}, {100, 5}}}
	small := stats("e", 5_000, 1, 5)
	s := Summarize([]RunResult{{Probes: []ProbeStats{big}}, {Probes: []ProbeStats{small}}})
	var ps []float64
	for _, r := range s[0].Rows {
		ps = append(ps, r.P)
	}
	if !reflect.DeepEqual(ps, []float64{50, 90, 99, 100}) {
		t.Fatalf("rows %v", ps)
	}
}

func TestPercentilesFor(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want []float64
	}{
		{0, []float64{50, 90, 99, 100}},
		{9_999, []float64{50, 90, 99, 100}},
		{10_000, []float64{50, 90, 99, 99.9, 100}},
		{100_000, []float64{50, 90, 99, 99.9, 99.99, 100}},
		{1_000_000, []float64{50, 90, 99, 99.9, 99.99, 99.999, 100}},
		{1e12, []float64{50, 90, 99, 99.9, 99.99, 99.999, 99.9999, 99.99999, 100}},
	} {
		if got := PercentilesFor(tc.n); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("PercentilesFor(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestFormatting(t *testing.T) {
	for ns, want := range map[int64]string{78: "0.078", 1234: "1.23", 45_600: "45.6", 1_230_000: "1,230", 123_456_789: "123,457"} {
		if got := micros(ns); got != want {
			t.Errorf("micros(%d) = %q, want %q", ns, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567"} {
		if got := group(n); got != want {
			t.Errorf("group(%d) = %q, want %q", n, got, want)
		}
	}
	line := probeLine(ProbeStats{Name: "hop", Count: 10_000, Clamped: 3, Percentiles: []Percentile{{50, 1000}, {99.9, 2000}, {100, 3000}}})
	for _, want := range []string{"hop (10,000)", "50: 1.00", "99.9: 2.00", "worst: 3.00 us", "3 clamped"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}
