package promtext

import (
	"math"
	"strings"
	"testing"
)

// TestWrite: families grouped with one HELP and TYPE each, in the order
// of their first sample; label values and help escaped; values spelt as
// the format has them.
func TestWrite(t *testing.T) {
	a := &Desc{"a_total", "A help with \\ and\nnewline.", Counter, []string{"path"}}
	b := &Desc{"b", "B.", Gauge, []string{"path", "tailer"}}
	c := &Desc{"c", "C.", Gauge, nil}
	var s Set
	s.Add(Sample{a, []string{"/x"}, 3})
	s.Add(Sample{b, []string{`/q"1"`, "back\\slash\nline"}, 0.5})
	s.Add(Sample{a, []string{"/y"}, 1 << 60}, Sample{c, nil, math.NaN()}, Sample{c, nil, math.Inf(1)}, Sample{c, nil, math.Inf(-1)})
	var out strings.Builder
	n, err := s.WriteTo(&out)
	want := `# HELP a_total A help with \\ and\nnewline.
# TYPE a_total counter
a_total{path="/x"} 3
a_total{path="/y"} 1.152921504606847e+18
# HELP b B.
# TYPE b gauge
b{path="/q\"1\"",tailer="back\\slash\nline"} 0.5
# HELP c C.
# TYPE c gauge
c NaN
c +Inf
c -Inf
`
	if err != nil || out.String() != want || n != int64(len(want)) {
		t.Fatalf("wrote (%d, %v):\n%s\nwant:\n%s", n, err, out.String(), want)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0", -7: "-7", 1 << 53: "9007199254740992", 1<<53 + 2: "9.007199254740994e+15", 0.25: "0.25", 123456789: "123456789"} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
