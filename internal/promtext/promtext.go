// Package promtext writes metrics in the Prometheus text exposition
// format (version 0.0.4), and names the metrics of maps and queues, for
// `offmap stat --prometheus`, `offqueue stats --prometheus` and the
// collector of the github.com/offmap/offmap/metrics module, which all
// report the same names (docs/METRICS.md). It is written here, not taken
// from github.com/prometheus/client_golang, so that the root module does
// not depend on it.
package promtext

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Type is a metric family's type.
type Type string

// The types the metrics of maps and queues use.
const (
	Counter Type = "counter"
	Gauge   Type = "gauge"
)

// Desc describes a metric family. Labels are the names of its labels, in
// the order a Sample gives their values.
type Desc struct {
	Name   string
	Help   string
	Type   Type
	Labels []string
}

// Sample is one value of a family, with its label values.
type Sample struct {
	Desc   *Desc
	Labels []string
	Value  float64
}

// Set gathers samples and writes them grouped by family, as the format
// requires: one HELP and TYPE line per family, then its samples, families
// in the order their first sample came.
type Set struct {
	order []*Desc
	by    map[*Desc][]Sample
}

// Add adds samples to the set.
func (s *Set) Add(samples ...Sample) {
	if s.by == nil {
		s.by = make(map[*Desc][]Sample)
	}
	for _, x := range samples {
		if _, ok := s.by[x.Desc]; !ok {
			s.order = append(s.order, x.Desc)
		}
		s.by[x.Desc] = append(s.by[x.Desc], x)
	}
}

// WriteTo writes the set in the text format.
func (s *Set) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	b := bufio.NewWriter(cw)
	for _, d := range s.order {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", d.Name, escapeHelp(d.Help), d.Name, d.Type)
		for _, x := range s.by[d] {
			b.WriteString(d.Name)
			if len(d.Labels) > 0 {
				b.WriteByte('{')
				for i, l := range d.Labels {
					if i > 0 {
						b.WriteByte(',')
					}
					v := ""
					if i < len(x.Labels) {
						v = x.Labels[i]
					}
					fmt.Fprintf(b, "%s=\"%s\"", l, EscapeLabel(v))
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			b.WriteString(FormatValue(x.Value))
			b.WriteByte('\n')
		}
	}
	err := b.Flush()
	return cw.n, err
}

// EscapeLabel escapes a label value: backslash, double quote and line
// feed.
func EscapeLabel(v string) string {
	if !strings.ContainsAny(v, "\\\"\n") {
		return v
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(v)
}

// FormatValue writes a value as the format spells it: integers without
// an exponent up to 2^53, NaN, +Inf and -Inf by name.
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == math.Trunc(v) && math.Abs(v) <= 1<<53:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
