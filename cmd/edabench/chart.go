package main

import (
	"time"

	"github.com/offmap/offmap/bench/eda"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writeChart draws instances against p99.9 (the study's Chart 1), with the
// SLA as a line, to a PNG file.
func writeChart(path string, rs []*eda.Result, sla time.Duration, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "instances"
	p.Y.Label.Text = "p99.9 latency, ms (corrected)"
	pts := make(plotter.XYs, len(rs))
	for i, r := range rs {
		pts[i].X, pts[i].Y = float64(r.Instances), ms(r.EndToEnd.P999)
	}
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	line.Color, points.Color = plotutil.Color(0), plotutil.Color(0)
	p.Add(line, points)
	p.Legend.Add("offmap queue", line, points)
	if len(rs) > 0 {
		slaLine, err := plotter.NewLine(plotter.XYs{{X: 0, Y: ms(int64(sla))}, {X: float64(rs[len(rs)-1].Instances), Y: ms(int64(sla))}})
		if err != nil {
			return err
		}
		slaLine.Color = plotutil.Color(1)
		slaLine.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(slaLine)
		p.Legend.Add("SLA", slaLine)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
