package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// measurement is one value a benchmark printed: "BenchmarkGet-2  2000000
// 190.5 ns/op  3.1 one-M-gets/s" gives ("Get", "ns/op", 190.5) and
// ("Get", "one-M-gets/s", 3.1).
type measurement struct {
	bench, unit string
	value       float64
}

// parseBench reads the result lines of a Go benchmark run. Lines that are
// not results (logs, PASS, goos:) are skipped; a result line that does not
// parse is an error, so that a changed format is not read as no figures.
func parseBench(out string) ([]measurement, error) {
	var ms []measurement
	for l := range strings.Lines(out) {
		f := strings.Fields(l)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // "BenchmarkX-2  --- FAIL" and the like; the exit status tells
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("benchmark line %q: values and units do not pair", strings.TrimSpace(l))
		}
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %v", strings.TrimSpace(l), err)
			}
			ms = append(ms, measurement{name, f[i+1], v})
		}
	}
	return ms, nil
}

// parseFloor reads bench/cfloor/spin.c's report, two lines such as
//
//	corrected    p50 0.36 us  p99 80.0 us  p99.9 1880.0 us  worst 4000.0 us
//
// into ("corrected", "p50-us", 0.36) and so on.
func parseFloor(out string) ([]measurement, error) {
	var ms []measurement
	for l := range strings.Lines(out) {
		f := strings.Fields(l)
		if len(f) != 13 || (f[0] != "corrected" && f[0] != "uncorrected") {
			continue
		}
		for i := 1; i+2 < len(f); i += 3 {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil || f[i+2] != "us" {
				return nil, fmt.Errorf("floor line %q: %q %q", strings.TrimSpace(l), f[i+1], f[i+2])
			}
			ms = append(ms, measurement{f[0], f[i] + "-us", v})
		}
	}
	if len(ms) != 8 {
		return nil, fmt.Errorf("floor report: %d figures, want 8 in %q", len(ms), out)
	}
	return ms, nil
}

// parsePages reads bench/cfloor/pages.c's report, lines such as
//
//	rested 9.38 us
//
// into ("rested", "us-a-page", 9.38), one measurement a line.
func parsePages(out string) ([]measurement, error) {
	var ms []measurement
	for l := range strings.Lines(out) {
		f := strings.Fields(l)
		if len(f) != 3 || (f[0] != "rested" && f[0] != "again") {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || f[2] != "us" {
			return nil, fmt.Errorf("page floor line %q", strings.TrimSpace(l))
		}
		ms = append(ms, measurement{f[0], "us-a-page", v})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("page floor report: no figures in %q", out)
	}
	return ms, nil
}

// parseSweepCSV reads the sweep.csv edabench sweep writes.
func parseSweepCSV(r io.Reader) ([]SweepCount, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) < 1 {
		return nil, fmt.Errorf("sweep.csv: no header")
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"instances", "p50_ms", "p99_ms", "p99_9_ms", "cpu_percent", "meets_sla", "runs", "runs_meeting_sla"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("sweep.csv: no column %q", h)
		}
	}
	var cs []SweepCount
	for _, row := range rows[1:] {
		var c SweepCount
		var errs []error
		num := func(h string) float64 {
			v, err := strconv.ParseFloat(row[col[h]], 64)
			if err != nil {
				errs = append(errs, err)
			}
			return v
		}
		c.Instances = int(num("instances"))
		c.P50, c.P99, c.P999, c.CPU = num("p50_ms"), num("p99_ms"), num("p99_9_ms"), num("cpu_percent")
		c.Runs, c.RunsMeeting = int(num("runs")), int(num("runs_meeting_sla"))
		meets, err := strconv.ParseBool(row[col["meets_sla"]])
		if err != nil {
			errs = append(errs, err)
		}
		c.Meets = meets
		if len(errs) > 0 {
			return nil, fmt.Errorf("sweep.csv row %q: %v", row, errs[0])
		}
		cs = append(cs, c)
	}
	return cs, nil
}
