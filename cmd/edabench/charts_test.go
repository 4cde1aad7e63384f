package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

const header = "series,transport,wait,measured_by,instances,p99_9_ms,cpu_percent,machine_cores,sla,doc,section,date,setup\n"

func writeData(t *testing.T, rows string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "eda.csv")
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadDataChecks: the data file is refused, with the line, when a
// number has no source, a verdict disagrees with its p99.9, or a column
// is missing.
func TestReadDataChecks(t *testing.T) {
	ok := "a,offmap,loop,offmap,10,2.5,14,2,meets,docs/X.md,S,2026-11-30,cmd\n"
	if _, err := readData(writeData(t, header+ok)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ rows, want string }{
		"no header":          {ok, "header"},
		"no source":          {header + "a,offmap,loop,offmap,10,2.5,14,2,meets,,S,,cmd\n", ":2: every number needs its source"},
		"verdict vs p99.9":   {header + "a,offmap,loop,offmap,10,120,14,2,meets,d,S,2026,cmd\n", `:2: sla "meets": disagrees with p99.9 120 ms`},
		"bad count":          {header + ok + "a,offmap,loop,offmap,0,2.5,14,2,meets,d,S,2026,cmd\n", `:3: instances "0"`},
		"who measured":       {header + "a,offmap,loop,someone,10,2.5,14,2,meets,d,S,2026,cmd\n", `measured_by "someone"`},
		"series changes":     {header + ok + "a,nats,loop,offmap,20,2.5,14,2,meets,d,S,2026,cmd\n", `:3: series "a" changes`},
		"short row":          {header + "a,offmap,loop\n", "wrong number of fields"},
		"p99.9 not a number": {header + "a,offmap,loop,offmap,10,fast,14,2,meets,d,S,2026,cmd\n", `p99_9_ms "fast"`},
	} {
		_, err := readData(writeData(t, c.rows))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

// TestCostBars: the cost is taken at a series' largest count within the
// SLA, as CPU used per 100 instances, or the machine's cores where no
// CPU is recorded; cheapest first; a series that never met the SLA has
// no bar.
func TestCostBars(t *testing.T) {
	rows := header +
		"ours,offmap,loop,offmap,100,10,44,2,meets,d,S,2026,c\n" +
		"ours,offmap,loop,offmap,300,33,131,2,meets,d,S,2026,c\n" +
		"ours,offmap,loop,offmap,500,1266,195,2,fails,d,S,2026,c\n" +
		"theirs,chronicle,,study,500,,,7,meets,d,S,2026,c\n" +
		"slow,redis,park,offmap,1,150,100,2,fails,d,S,2026,c\n" +
		"one,kafka,,study,1,,,7,meets,d,S,2026,c\n"
	recs, err := readData(writeData(t, rows))
	if err != nil {
		t.Fatal(err)
	}
	bars := costBars(recs)
	want := []struct {
		series    string
		instances int
		cost      float64
	}{{"ours", 300, 131.0 / 300}, {"theirs", 500, 1.4}, {"one", 1, 700}}
	if len(bars) != len(want) {
		t.Fatalf("%d bars, want %d: %+v", len(bars), len(want), bars)
	}
	for i, w := range want {
		b := bars[i]
		if b.rec.series != w.series || b.rec.instances != w.instances || math.Abs(b.cost-w.cost) > 1e-9 {
			t.Errorf("bar %d: %s at %d: %g, want %s at %d: %g", i, b.rec.series, b.rec.instances, b.cost, w.series, w.instances, w.cost)
		}
	}
	if got := costText(bars[0]); got != "0.437: 300 instances at 131 % CPU" {
		t.Errorf("label %q", got)
	}
	if got := costText(bars[2]); got != "700: 1 instance on 7 cores" {
		t.Errorf("label %q", got)
	}
}

// TestLogAxis: an axis of counts is marked at whole numbers only and
// labelled as plain numbers, never 1e+03.
func TestLogAxis(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		counts bool
		want   string
	}{
		{0.8, 625, true, "1 2 5 10 20 50 100 200 500"},
		{0.8, 3.75, true, "1 2 3"},
		{1, 12500, false, "1 10 100 1,000 10,000"},
		{0.1, 2100, false, "0.1 1 10 100 1,000"},
	} {
		var a plot.Axis
		logAxis(&a, c.lo, c.hi, c.counts)
		var labels []string
		for _, tk := range a.Tick.Marker.Ticks(a.Min, a.Max) {
			v := math.Pow(10, tk.Value)
			if c.counts && math.Abs(v-math.Round(v)) > 1e-9 {
				t.Errorf("%g-%g: a mark at %g on an axis of counts", c.lo, c.hi, v)
			}
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("%g-%g: labels %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

// TestSegmentInRect checks the test that keeps the SLA label off the
// lines.
func TestSegmentInRect(t *testing.T) {
	r := rect(10, 10, 20, 20)
	for _, c := range []struct {
		a, b [2]float64
		want bool
	}{
		{[2]float64{0, 0}, [2]float64{5, 5}, false},
		{[2]float64{0, 0}, [2]float64{30, 30}, true},
		{[2]float64{30, 0}, [2]float64{40, 30}, false},
		{[2]float64{15, 15}, [2]float64{15, 15}, true},
		{[2]float64{0, 15}, [2]float64{30, 15}, true},
	} {
		if got := segmentInRect(pt(c.a), pt(c.b), r); got != c.want {
			t.Errorf("%v-%v: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func pt(p [2]float64) vg.Point { return vg.Point{X: vg.Length(p[0]), Y: vg.Length(p[1])} }

func rect(x0, y0, x1, y1 float64) vg.Rectangle {
	return vg.Rectangle{Min: pt([2]float64{x0, y0}), Max: pt([2]float64{x1, y1})}
}
