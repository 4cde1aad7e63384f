package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/offmap/offmap/bench/eda"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The look of edabench's charts: sized for a README page (9 x 5.4 in,
// drawn at twice the screen's 96 dpi so that it stays sharp when the page
// scales it down), a sans-serif face, the legend beside the frame rather
// than over the data, and a caption under it.

const (
	chartWidth  = 9 * vg.Inch
	chartHeight = 5.4 * vg.Inch
	chartDPI    = 192
)

var (
	sans   = font.Font{Typeface: "Liberation", Variant: "Sans"}
	black  = color.Gray{Y: 0}
	grey   = color.Gray{Y: 90}
	gridOf = color.Gray{Y: 225}
)

func textStyle(size vg.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(sans, size), Handler: plot.DefaultTextHandler}
}

// newPlot returns a plot in the charts' style, without title or legend
// (the figure draws those).
func newPlot(xLabel, yLabel string, hgrid bool) *plot.Plot {
	p := plot.New()
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 10)
		a.Padding = 0
	}
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	g := &plotter.Grid{Vertical: draw.LineStyle{Color: gridOf, Width: vg.Points(0.6)}}
	if hgrid {
		g.Horizontal = g.Vertical
	}
	p.Add(g)
	return p
}

// logAxis makes a an axis of powers of ten over [lo, hi]: the charts
// plot log10 of their values on a linear axis (gonum's LogScale places a
// centred axis label at the linear midpoint, which pushes the frame in),
// labelled as plain numbers (1, 20, 5,000, 0.5) at 1, 2 and 5 times the
// powers of ten; at every mark when the axis spans about a decade or
// less, and at the powers of ten only when it spans more than three.
// An axis of counts has marks at whole numbers only.
func logAxis(a *plot.Axis, lo, hi float64, counts bool) {
	a.Min, a.Max = math.Log10(lo), math.Log10(hi)
	span := math.Log10(hi / lo)
	wide, narrow := span > 3.2, span < 1.3
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1; m < 10; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) || (counts && v < 1) {
				continue
			}
			t := plot.Tick{Value: math.Log10(v)}
			if narrow || m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = numberText(v)
			}
			ticks = append(ticks, t)
		}
	}
	a.Tick.Marker = plot.ConstantTicks(ticks)
}

// numberText formats a tick value: 0.5, 2, 1,000.
func numberText(v float64) string {
	if v >= 1 {
		return count(int64(math.Round(v)))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// slaLine is a horizontal line across the frame at the SLA, labelled
// where no series crosses the label.
type slaLine struct {
	ms     float64
	label  string
	series []plotter.XYs // in axis units (log10), to keep the label off
}

func (s slaLine) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	y := trY(math.Log10(s.ms))
	c.StrokeLine2(draw.LineStyle{Color: black, Width: vg.Points(1.4), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}},
		c.Min.X, y, c.Max.X, y)
	sty := textStyle(10, black)
	w, h := sty.Width(s.label), sty.Height(s.label)
	pad := vg.Points(3)
	var segs [][2]vg.Point
	for _, pts := range s.series {
		for i := 1; i < len(pts); i++ {
			segs = append(segs, [2]vg.Point{{X: trX(pts[i-1].X), Y: trY(pts[i-1].Y)}, {X: trX(pts[i].X), Y: trY(pts[i].Y)}})
		}
		for _, pt := range pts { // markers: a segment of no length
			q := vg.Point{X: trX(pt.X), Y: trY(pt.Y)}
			segs = append(segs, [2]vg.Point{q, q})
		}
	}
	// Candidates: above the line, then below it, from left to right.
	at := vg.Point{X: c.Min.X + pad, Y: y + pad}
	found := false
	for _, dy := range []vg.Length{pad, -pad - h} {
		for x := c.Min.X + pad; x+w < c.Max.X && !found; x += vg.Points(6) {
			box := vg.Rectangle{Min: vg.Point{X: x - pad, Y: y + dy - pad}, Max: vg.Point{X: x + w + pad, Y: y + dy + h + pad}}
			if !crossesAny(box, segs, vg.Points(4)) {
				at, found = vg.Point{X: x, Y: y + dy}, true
			}
		}
	}
	c.FillText(sty, at, s.label)
}

// crossesAny reports whether any segment passes within margin of r.
func crossesAny(r vg.Rectangle, segs [][2]vg.Point, margin vg.Length) bool {
	r.Min.X, r.Min.Y, r.Max.X, r.Max.Y = r.Min.X-margin, r.Min.Y-margin, r.Max.X+margin, r.Max.Y+margin
	for _, sg := range segs {
		if segmentInRect(sg[0], sg[1], r) {
			return true
		}
	}
	return false
}

// segmentInRect reports whether the segment ab meets r, by clipping it
// to r (Liang and Barsky).
func segmentInRect(a, b vg.Point, r vg.Rectangle) bool {
	t0, t1 := 0.0, 1.0
	dx, dy := float64(b.X-a.X), float64(b.Y-a.Y)
	for _, e := range [4][2]float64{
		{-dx, float64(a.X - r.Min.X)}, {dx, float64(r.Max.X - a.X)},
		{-dy, float64(a.Y - r.Min.Y)}, {dy, float64(r.Max.Y - a.Y)},
	} {
		p, q := e[0], e[1]
		if p == 0 {
			if q < 0 {
				return false
			}
			continue
		}
		t := q / p
		if p < 0 {
			t0 = math.Max(t0, t)
		} else {
			t1 = math.Min(t1, t)
		}
		if t0 > t1 {
			return false
		}
	}
	return true
}

// A figure is a plot with a title over it, a legend to its right and a
// caption under it.
type figure struct {
	title   string
	plot    *plot.Plot
	legend  plot.Legend
	caption []string
}

func newFigure(title string, p *plot.Plot) *figure {
	f := &figure{title: title, plot: p, legend: plot.NewLegend()}
	f.legend.TextStyle = textStyle(10, black)
	f.legend.Top, f.legend.Left = true, true
	f.legend.ThumbnailWidth = vg.Points(28)
	f.legend.Padding = vg.Points(4)
	return f
}

// draw lays the figure out on c.
func (f *figure) draw(c draw.Canvas) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	margin := vg.Points(10)
	c = draw.Crop(c, margin, -margin, margin/2, -margin)

	title := textStyle(14, black)
	title.XAlign = draw.XCenter
	title.YAlign = draw.YTop
	c.FillText(title, vg.Point{X: c.Center().X, Y: c.Max.Y}, f.title)
	c.Max.Y -= title.Height(f.title) + vg.Points(8)

	cap := textStyle(9, grey)
	cap.YAlign = draw.YBottom
	lineH := cap.Height("Mg") * 1.2
	for i := len(f.caption) - 1; i >= 0; i-- {
		c.FillText(cap, vg.Point{X: c.Min.X, Y: c.Min.Y}, f.caption[i])
		c.Min.Y += lineH
	}
	if len(f.caption) > 0 {
		c.Min.Y += vg.Points(6)
	}

	plotC := c
	if w := f.legendWidth(c); w > 0 {
		plotC = draw.Crop(c, 0, -(w + vg.Points(14)), 0, 0)
		data := f.plot.DataCanvas(plotC)
		legC := draw.Crop(c, c.Max.X-c.Min.X-w, 0, 0, 0)
		legC.Max.Y = data.Max.Y
		f.legend.Draw(legC)
	}
	f.plot.Draw(plotC)
}

func (f *figure) legendWidth(c draw.Canvas) vg.Length {
	r := f.legend.Rectangle(c)
	return r.Max.X - r.Min.X
}

// save writes the figure as PNG or SVG, by the file's extension.
func (f *figure) save(path string) error {
	var out io.WriterTo
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		c := vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(chartDPI))
		f.draw(draw.New(c))
		out = vgimg.PngCanvas{Canvas: c}
	case ".svg":
		c := vgsvg.NewWith(vgsvg.UseWH(chartWidth, chartHeight), vgsvg.EmbedFonts(true)) // drawn as measured
		f.draw(draw.New(c))
		out = c
	default:
		return fmt.Errorf("%s: want a .png or .svg file", path)
	}
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := out.WriteTo(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// A line is one series on a latency chart.
type line struct {
	name   string
	pts    plotter.XYs // instances, p99.9 in ms
	color  color.Color
	dashes []vg.Length
	width  vg.Length
	glyph  draw.GlyphDrawer
}

// latencyFigure draws instances against p99.9 on log axes (instance
// counts from 1 to thousands, latencies from a millisecond to seconds),
// one line per series, with the SLA.
func latencyFigure(title string, lines []line, slaMS float64, caption []string) (*figure, error) {
	p := newPlot("instances (log scale)", "p99.9 latency, ms (log scale)", true)
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), slaMS, slaMS
	for _, l := range lines {
		for _, pt := range l.pts {
			if pt.X < 1 || pt.Y <= 0 {
				return nil, fmt.Errorf("%s: point (%g, %g) cannot go on a log axis", l.name, pt.X, pt.Y)
			}
			xlo, xhi = math.Min(xlo, pt.X), math.Max(xhi, pt.X)
			ylo, yhi = math.Min(ylo, pt.Y), math.Max(yhi, pt.Y)
		}
	}
	if xlo > xhi {
		return nil, fmt.Errorf("nothing to draw")
	}
	if xlo == xhi {
		xlo, xhi = xlo/2, xhi*2
	}
	logAxis(&p.X, xlo/1.25, xhi*1.25, true)
	// From a power of ten, so that the lowest points have a label under them.
	logAxis(&p.Y, math.Pow(10, math.Floor(math.Log10(ylo/1.25))), yhi*1.5, false)
	sla := slaLine{ms: slaMS, label: fmt.Sprintf("SLA %s ms", numberText(slaMS))}
	for _, l := range lines {
		pts := make(plotter.XYs, len(l.pts))
		for i, pt := range l.pts {
			pts[i] = plotter.XY{X: math.Log10(pt.X), Y: math.Log10(pt.Y)}
		}
		sla.series = append(sla.series, pts)
	}
	p.Add(sla)
	f := newFigure(title, p)
	f.caption = caption
	for i, l := range lines {
		ln, sc, err := plotter.NewLinePoints(sla.series[i])
		if err != nil {
			return nil, err
		}
		ln.Color, ln.Dashes, ln.Width = l.color, l.dashes, l.width
		sc.Color, sc.Shape, sc.Radius = l.color, l.glyph, vg.Points(3.2)
		p.Add(ln, sc)
		if len(lines) > 1 { // one line is named by the title
			f.legend.Add(l.name, ln, sc)
		}
	}
	return f, nil
}

// writeChart draws a sweep's p99.9 against its instance counts (the
// study's Chart 1) with the SLA.
func writeChart(path string, rs []*eda.Result, v verdict, title string) error {
	var pts plotter.XYs
	for _, r := range rs {
		if r.EndToEnd.P999 > 0 {
			pts = append(pts, plotter.XY{X: float64(r.Instances), Y: ms(r.EndToEnd.P999)})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	f, err := latencyFigure(title, []line{{name: "offmap queue", pts: pts, color: transportColor("offmap"),
		width: vg.Points(2), glyph: draw.CircleGlyph{}}}, ms(int64(v.sla)),
		[]string{fmt.Sprintf("p99.9 over all runs pooled, from the scheduled send (corrected for coordinated omission); "+
			"%s messages a second per instance.", count(int64(rs[0].Rate)))})
	if err != nil {
		return err
	}
	return f.save(path)
}
