package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/bench/latency"
)

// What edabench prints. Every table has one unit per column group
// (latencies in ms, CPU in % of one core), and a legend under it that
// explains every column and verdict; each command ends with one
// "Result:" paragraph.

// describe prints the setting a command runs, in one line.
func describe(w io.Writer, what string, cfg eda.Config) {
	runs := "runs"
	if cfg.Runs == 1 {
		runs = "run"
	}
	each := ", each"
	if what == instances(1) {
		each = ":"
	}
	fmt.Fprintf(w, "EDA chain on offmap queues: %s%s a sender, 5 services and a receiver over 6 queues,\n"+
		"sending %s messages a second; %s wait, %s;\n%s warm-up, then %d measured %s of %s.\n\n",
		what, each, count(int64(cfg.Rate)), cfg.Wait, placementText(cfg.Placement), durationText(cfg.Warmup), cfg.Runs, runs, durationText(cfg.RunLength))
}

func placementText(p eda.Placement) string {
	switch p {
	case eda.ProcessPerInstance:
		return "a process per instance"
	case eda.ProcessPerService:
		return "a process per service"
	case eda.ProcessPerCPU:
		return "a process per CPU"
	}
	return "all instances in one process"
}

// instances says "1 instance" or "n instances".
func instances(n int) string {
	if n == 1 {
		return "1 instance"
	}
	return count(int64(n)) + " instances"
}

// count formats n with thousands separators: 3,000,000.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + count(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// msText formats a latency in ms: two decimals from 1 ms, three
// significant digits below (0.520, 0.0674, 0.00166), so that a
// microsecond never prints as 0.00.
func msText(ns int64) string {
	v := ms(ns)
	switch {
	case v == 0:
		return "0"
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	dec := 2
	for x := v; x < 1 && dec < 6; x *= 10 {
		dec++
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// minPerRun is how many messages a run needs for a p99.9 of its own
// (latency.PercentilesFor: ten samples beyond it).
func minPerRun() int64 {
	for n := int64(1000); ; n *= 10 {
		for _, p := range latency.PercentilesFor(n) {
			if p == 99.9 {
				return n
			}
		}
	}
}

// sla is a setting's verdict, as its table column prints it.
func (v verdict) mark(r *eda.Result) string {
	switch {
	case r.Lost():
		return "lost"
	case v.meets(r):
		return "meets"
	}
	return "fails"
}

// writeTable prints one row per setting, in the shape of the Chronicle EDA article's
// Table 2 with the uncorrected figures beside the corrected ones, and the
// legend under it.
func writeTable(w io.Writer, rs []*eda.Result, v verdict) {
	const lat = "%9s%9s%9s%9s"
	fmt.Fprintf(w, "%20s  %s  %s\n", "", banner("latency in ms, corrected", 36), banner("latency in ms, uncorrected", 36))
	fmt.Fprintf(w, "%9s %10s  "+lat+"  "+lat+" %7s %8s  %s\n", "instances", "messages",
		"p50", "p99", "p99.9", "worst", "p50", "p99", "p99.9", "worst", "CPU %", "runs ok", "SLA")
	for _, r := range rs {
		c, u := r.EndToEnd, r.Uncorrected
		runsOK := "-"
		if k, n := v.runsMeeting(r); n > 0 {
			runsOK = fmt.Sprintf("%d/%d", k, n)
		}
		fmt.Fprintf(w, "%9d %10s  "+lat+"  "+lat+" %7.1f %8s  %s\n", r.Instances, count(r.Messages()),
			msText(c.P50), msText(c.P99), msText(c.P999), msText(c.Worst),
			msText(u.P50), msText(u.P99), msText(u.P999), msText(u.Worst), r.CPU.Percent, runsOK, v.mark(r))
	}
	writeLegend(w, v, runtime.NumCPU())
}

// banner centres title in a rule of width characters: "--- title ---".
func banner(title string, width int) string {
	n := width - len(title) - 2
	if n < 2 {
		return title
	}
	return strings.Repeat("-", n/2) + " " + title + " " + strings.Repeat("-", n-n/2)
}

// writeLegend explains every column and verdict of writeTable.
func writeLegend(w io.Writer, v verdict, cores int) {
	sla := slaText(v.sla)
	fmt.Fprintf(w, `
  instances  chains run at once, each a sender, 5 services and a receiver over 6 queues
  messages   messages timed end to end in the measured runs (warm-up excluded)
  latency    from the send to the receiver, in ms: 50th, 99th and 99.9th percentile, and the worst;
             corrected: from the scheduled send, so a late send counts its wait (coordinated
             omission); uncorrected: from the actual send, as the Chronicle EDA article measured
  CPU %%      every process of the run over the measured runs, in %% of one core (%d cores here:
             %d %% is all of them)
  runs ok    runs whose own p99.9 (corrected) is under %s; - : runs of fewer than %s messages
             have no p99.9 of their own
  SLA        meets: p99.9 (corrected, %s) under %s, every message intact;
             fails: p99.9 %s or more, or messages still on their way, late, when the wait ended;
             lost: messages lost or counters wrong
`, cores, 100*cores, sla, count(minPerRun()), v, sla, sla)
}

// slaText says "100 ms".
func slaText(d time.Duration) string {
	return strings.TrimSuffix(msText(int64(d)), ".00") + " ms"
}

// wrap prints text as lines of at most width characters.
func wrap(w io.Writer, text string, width int) {
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
}

// judged returns the p99.9 the verdict judges a setting by, and where it
// was taken.
func (v verdict) judged(r *eda.Result) (int64, string) {
	if v.over == "median" {
		if p := runP999s(r); len(p) > 0 {
			slices.Sort(p)
			return p[len(p)/2], "in the median run"
		}
	}
	return r.EndToEnd.P999, "over all runs pooled"
}

// p999Text says "p99.9 33.16 ms over all runs pooled".
func (v verdict) p999Text(r *eda.Result) string {
	ns, where := v.judged(r)
	return fmt.Sprintf("p99.9 %s ms %s", msText(ns), where)
}

// lostText says what did not add up in a result that is not OK.
func lostText(r *eda.Result) string {
	s := fmt.Sprintf("sent %s, delivered %s, malformed %s", count(r.Sent), count(r.Delivered), count(r.Bad))
	if len(r.CounterErrors) > 0 {
		s += fmt.Sprintf(", %d counters wrong (%s)", len(r.CounterErrors), strings.Join(r.CounterErrors, "; "))
	}
	return s
}

// writeRunResult prints the verdict of one setting.
func writeRunResult(w io.Writer, r *eda.Result, v verdict) {
	var text string
	switch {
	case r.Lost():
		text = fmt.Sprintf("at %s the chain lost messages or counts (%s): a fault, not a latency verdict.",
			instances(r.Instances), lostText(r))
	case v.meets(r):
		text = fmt.Sprintf("at %s the chain meets the SLA: %s, under %s; every message arrived intact and every counter matched.",
			instances(r.Instances), v.p999Text(r), slaText(v.sla))
	case r.Late > 0:
		text = fmt.Sprintf("at %s the chain fails the SLA: %s, %s or more, and %s messages were still on their way, untimed, when the wait for them ended (the chain was still draining its backlog).",
			instances(r.Instances), v.p999Text(r), slaText(v.sla), count(r.Late))
	default:
		text = fmt.Sprintf("at %s the chain fails the SLA: %s, %s or more (every message arrived intact).",
			instances(r.Instances), v.p999Text(r), slaText(v.sla))
	}
	fmt.Fprintln(w)
	wrap(w, "Result: "+text, resultWidth)
}

// resultWidth is the width the Result paragraph is wrapped to.
const resultWidth = 100

// durationText prints a duration without trailing zero units: 15s, 1m30s.
func durationText(d time.Duration) string {
	s := d.Round(time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
