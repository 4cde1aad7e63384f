package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/offmap/offmap/internal/cliargs"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// edabench chart draws the recorded EDA results, ours and the Chronicle EDA article's,
// from a data file (docs/charts/eda.csv) into two charts after the
// study's: p99.9 against instances (its Chart 1) and the cores 100
// instances cost within the SLA (its Chart 2).

const (
	defaultData = "docs/charts/eda.csv"
	chartSLA    = 100 // ms, the Chronicle EDA article's SLA
)

// dataColumns are the data file's columns, in this order.
var dataColumns = []string{"series", "transport", "wait", "measured_by", "instances", "p99_9_ms",
	"cpu_percent", "machine_cores", "sla", "doc", "section", "date", "setup"}

// A record is one setting of one series in the data file.
type record struct {
	series     string  // legend name
	transport  string  // colour key: offmap, nats, kfake, redis, chronicle, kafka
	wait       string  // loop, park, block, or empty
	measuredBy string  // offmap (this repository's benchmarks) or study
	instances  int     //
	p999       float64 // ms, corrected for coordinated omission; 0: not recorded
	cpu        float64 // % of one core, every process; 0: not recorded
	cores      int     // cores of the machine
	meets      bool    // p99.9 under 100 ms and every message intact
	line       int     // in the file
}

var chartCommand = command{
	name:     "chart",
	synopsis: "[flags]",
	summary:  "draw the recorded results (docs/charts/eda.csv) as the Chronicle EDA article's Chart 1 and Chart 2",
	help: `Draws eda-p999 (instances against p99.9, the Chronicle EDA article's Chart 1) and eda-cost
(cores per 100 instances within the SLA, its Chart 2) from the recorded
results, and prints the cost table. Run it from the repository root.`,
	examples: `  # redraw docs/charts/eda-p999.png and eda-cost.png
  go run ./cmd/edabench chart
  # SVG, elsewhere
  edabench chart --data docs/charts/eda.csv --format svg -o /tmp/charts`,
	flags: func(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error {
		data := fs.String("data", defaultData, "the recorded results to draw (CSV `FILE`; see docs/charts/README.md)")
		out := fs.String("out", "", "`DIR` for the charts (default: the data file's)")
		cliargs.Alias(fs, "o", "out")
		format := fs.String("format", "png", "png or svg")
		return func(ctx context.Context, stdout, stderr io.Writer) error {
			return chartCmd(*data, *out, *format, stdout)
		}
	},
}

func chartCmd(data, out, format string, stdout io.Writer) error {
	if format != "png" && format != "svg" {
		return usageErrorf("--format %q: want png or svg", format)
	}
	if out == "" {
		out = filepath.Dir(data)
	}
	recs, err := readData(data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("cannot use --out %s: %v", out, err)
	}
	p999 := filepath.Join(out, "eda-p999."+format)
	cost := filepath.Join(out, "eda-cost."+format)
	f, err := p999Figure(recs)
	if err != nil {
		return err
	}
	if err := f.save(p999); err != nil {
		return err
	}
	bars := costBars(recs)
	f, err = costFigure(bars)
	if err != nil {
		return err
	}
	if err := f.save(cost); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Cores per 100 instances at the largest count within the SLA (%s):\n\n", data)
	fmt.Fprintf(stdout, "  %-40s %10s %7s %7s  %s\n", "series", "instances", "CPU %", "cores", "cores per 100 instances")
	for _, b := range bars {
		cpu := "-"
		if b.rec.cpu > 0 {
			cpu = strconv.FormatFloat(b.rec.cpu, 'f', -1, 64)
		}
		fmt.Fprintf(stdout, "  %-40s %10d %7s %7d  %.3g\n", b.rec.series, b.rec.instances, cpu, b.rec.cores, b.cost)
	}
	fmt.Fprintf(stdout, "\n  instances  the largest count of the series within the SLA (p99.9 under %d ms)\n"+
		"  CPU %%      CPU used at that count, %% of one core (-: not recorded)\n"+
		"  cores      cores of the machine\n"+
		"  cores per 100 instances  CPU %% / instances; where no CPU is recorded, cores x 100 / instances\n"+
		"\nWrote %s and %s\n", chartSLA, p999, cost)
	return nil
}

// readData reads and checks the data file.
func readData(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%v (run from the repository root, or give -data)", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(rows) < 2 || !slices.Equal(rows[0], dataColumns) {
		return nil, fmt.Errorf("%s: want a header row %s and data rows", path, strings.Join(dataColumns, ","))
	}
	var recs []record
	kind := map[string]string{} // series -> transport/wait/measured_by
	for i, row := range rows[1:] {
		line := i + 2
		bad := func(col, why string) error {
			return fmt.Errorf("%s:%d: %s %q: %s", path, line, col, row[slices.Index(dataColumns, col)], why)
		}
		rec := record{series: row[0], transport: row[1], wait: row[2], measuredBy: row[3], line: line}
		if rec.series == "" || rec.transport == "" {
			return nil, fmt.Errorf("%s:%d: series and transport are required", path, line)
		}
		if rec.measuredBy != "offmap" && rec.measuredBy != "study" {
			return nil, bad("measured_by", "want offmap or study")
		}
		if rec.instances, err = strconv.Atoi(row[4]); err != nil || rec.instances < 1 {
			return nil, bad("instances", "want a count of 1 or more")
		}
		if row[5] != "" {
			if rec.p999, err = strconv.ParseFloat(row[5], 64); err != nil || rec.p999 <= 0 {
				return nil, bad("p99_9_ms", "want milliseconds over 0, or nothing")
			}
		}
		if row[6] != "" {
			if rec.cpu, err = strconv.ParseFloat(row[6], 64); err != nil || rec.cpu <= 0 {
				return nil, bad("cpu_percent", "want a percentage over 0, or nothing")
			}
		}
		if rec.cores, err = strconv.Atoi(row[7]); err != nil || rec.cores < 1 {
			return nil, bad("machine_cores", "want a count of 1 or more")
		}
		switch row[8] {
		case "meets":
			rec.meets = true
		case "fails":
		default:
			return nil, bad("sla", "want meets or fails")
		}
		if rec.p999 > 0 && rec.meets != (rec.p999 < chartSLA) {
			return nil, bad("sla", fmt.Sprintf("disagrees with p99.9 %g ms", rec.p999))
		}
		if row[9] == "" || row[11] == "" {
			return nil, fmt.Errorf("%s:%d: every number needs its source: doc and date", path, line)
		}
		k := rec.transport + "/" + rec.wait + "/" + rec.measuredBy
		if prev, ok := kind[rec.series]; ok && prev != k {
			return nil, fmt.Errorf("%s:%d: series %q changes transport, wait or measured_by", path, line, rec.series)
		}
		kind[rec.series] = k
		recs = append(recs, rec)
	}
	return recs, nil
}

// seriesOf groups records by series, in the order of the file.
func seriesOf(recs []record) [][]record {
	var out [][]record
	at := map[string]int{}
	for _, r := range recs {
		i, ok := at[r.series]
		if !ok {
			i = len(out)
			at[r.series] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	for _, s := range out {
		slices.SortStableFunc(s, func(a, b record) int { return a.instances - b.instances })
	}
	return out
}

// Colours (Okabe and Ito's, told apart by most colour-blind readers) by
// transport; line and marker by wait.
var transportColors = map[string]color.Color{
	"offmap":    color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}, // blue
	"nats":      color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF}, // green
	"kfake":     color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF}, // orange
	"redis":     color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF}, // vermilion
	"chronicle": color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF}, // purple
	"kafka":     color.RGBA{R: 0x56, G: 0x56, B: 0x56, A: 0xFF}, // grey
}

func transportColor(t string) color.Color {
	if c, ok := transportColors[t]; ok {
		return c
	}
	return color.RGBA{R: 0x56, G: 0xB4, B: 0xE9, A: 0xFF} // sky blue
}

// p999Caption is printed under the latency chart.
var p999Caption = []string{
	"Per instance: a sender, 5 services and a receiver over 6 topics, 1,000 messages a second; the instances in one process, brokers beside them, on",
	"2 cores; p99.9 from the scheduled send (corrected for coordinated omission); a 3 s warm-up, then two 3 s runs per count (15 s runs: one of 15 s).",
	"loop: offmap's event loops; park: poll, then sleep 125 us (the Chronicle EDA article's loop); block: a goroutine blocking per service. kfake speaks the Kafka",
	"protocol; it is not Kafka. Data, sources and dates: docs/charts/eda.csv.",
}

// p999Figure draws every series with a recorded p99.9.
func p999Figure(recs []record) (*figure, error) {
	var lines []line
	seen := map[string]int{} // transport/wait -> series drawn
	for _, s := range seriesOf(recs) {
		var pts plotter.XYs
		for _, r := range s {
			if r.p999 > 0 {
				pts = append(pts, plotter.XY{X: float64(r.instances), Y: r.p999})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l := line{name: s[0].series, pts: pts, color: transportColor(s[0].transport), width: vg.Points(1.5)}
		switch s[0].wait {
		case "loop":
			l.width, l.glyph = vg.Points(2.2), draw.CircleGlyph{}
		case "park":
			l.glyph = draw.SquareGlyph{}
		case "block":
			l.dashes, l.glyph = []vg.Length{vg.Points(5), vg.Points(3)}, draw.PyramidGlyph{}
		default:
			l.glyph = draw.CrossGlyph{}
		}
		k := s[0].transport + "/" + s[0].wait
		if seen[k] > 0 { // the same transport and wait again, from another run
			l.dashes, l.glyph, l.width = []vg.Length{vg.Points(1.5), vg.Points(2)}, draw.RingGlyph{}, vg.Points(1.5)
		}
		seen[k]++
		lines = append(lines, l)
	}
	return latencyFigure("EDA chain: p99.9 latency against instances (SLA 100 ms)", lines, chartSLA, p999Caption)
}

// A costBar is a series' cost at its largest count within the SLA.
type costBar struct {
	rec  record  // the setting
	cost float64 // cores per 100 instances
}

// costBars returns, for every series with a count within the SLA, the
// cores per 100 instances at its largest such count, cheapest first.
func costBars(recs []record) []costBar {
	var bars []costBar
	for _, s := range seriesOf(recs) {
		var best *record
		for i := range s {
			if s[i].meets {
				best = &s[i]
			}
		}
		if best == nil {
			continue
		}
		cores := best.cpu / 100
		if best.cpu == 0 {
			cores = float64(best.cores)
		}
		bars = append(bars, costBar{rec: *best, cost: cores * 100 / float64(best.instances)})
	}
	slices.SortStableFunc(bars, func(a, b costBar) int {
		switch {
		case a.cost < b.cost:
			return -1
		case a.cost > b.cost:
			return 1
		}
		return 0
	})
	return bars
}

// hbars draws horizontal bars on a log X axis from the frame's left edge,
// each labelled with its value and how it was reached.
type hbars struct {
	bars []costBar
}

func (h hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	n := len(h.bars)
	step := trY(1) - trY(0)
	for i, b := range h.bars {
		// Cheapest on top: the first bar takes the highest position.
		y := trY(float64(n - 1 - i))
		x := trX(math.Log10(b.cost))
		rect := vg.Rectangle{Min: vg.Point{X: c.Min.X, Y: y - step*0.32}, Max: vg.Point{X: x, Y: y + step*0.32}}
		col := transportColor(b.rec.transport)
		fill := col
		if b.rec.measuredBy == "study" {
			fill = tint(col, 0.55)
		}
		c.SetColor(fill)
		c.Fill(rect.Path())
		c.SetLineStyle(draw.LineStyle{Color: col, Width: vg.Points(1)})
		c.Stroke(rect.Path())

		label := costText(b)
		sty := textStyle(10, black)
		sty.YAlign = draw.YCenter
		w := sty.Width(label)
		pt := vg.Point{X: x + vg.Points(5), Y: y}
		if x+vg.Points(5)+w > c.Max.X { // no room after the bar: inside it
			sty.Color = color.White
			if b.rec.measuredBy == "study" {
				sty.Color = black
			}
			pt.X = x - vg.Points(5) - w
		}
		c.FillText(sty, pt, label)
	}
}

// tint mixes c with white: f = 0 is c, 1 is white.
func tint(c color.Color, f float64) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8(float64(v>>8)*(1-f) + 255*f) }
	return color.RGBA{R: mix(r), G: mix(g), B: mix(b), A: 0xFF}
}

// costText labels a bar: "0.33 cores: 400 instances at 133 % CPU".
func costText(b costBar) string {
	v := strconv.FormatFloat(b.cost, 'g', 3, 64)
	if b.cost >= 100 {
		v = count(int64(math.Round(b.cost)))
	}
	if b.rec.cpu == 0 {
		return fmt.Sprintf("%s: %s on %d cores", v, instances(b.rec.instances), b.rec.cores)
	}
	return fmt.Sprintf("%s: %s at %s %% CPU", v, instances(b.rec.instances), strconv.FormatFloat(b.rec.cpu, 'f', -1, 64))
}

// costCaption is printed under the cost chart.
var costCaption = []string{
	"Cores per 100 instances = CPU used (% of one core) / instances, at the largest count whose p99.9 stayed under 100 ms. Ours: 2 cores,",
	"the CPU of every process of the run. The Chronicle EDA article's (pale bars; Java on 7 cores of a Ryzen 9 5950X, latency uncorrected): the 7 cores",
	"over the instances they carried. kfake speaks the Kafka protocol; it is not Kafka. Sources: docs/charts/eda.csv.",
}

// costFigure draws the cost bars, cheapest on top.
func costFigure(bars []costBar) (*figure, error) {
	if len(bars) == 0 {
		return nil, fmt.Errorf("no series has a count within the SLA")
	}
	p := newPlot("cores per 100 instances within the SLA (log scale; less is better)", "", false)
	names := make([]string, len(bars))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, b := range bars {
		names[len(bars)-1-i] = b.rec.series
		lo, hi = math.Min(lo, b.cost), math.Max(hi, b.cost)
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(bars))-0.4
	logAxis(&p.X, math.Pow(10, math.Floor(math.Log10(lo/2))), hi*3, false)
	p.Add(hbars{bars: bars})
	f := newFigure("EDA chain: what 100 instances cost within the SLA (less is better)", p)
	f.caption = costCaption
	return f, nil
}
