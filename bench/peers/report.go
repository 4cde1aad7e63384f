package peers

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/offmap/offmap/bench/eda"
)

// Tables are Markdown, so that the output pastes into docs/COMPARISON.md.

// times formats a ratio to offmap: how many times offmap's time a peer
// takes (below 1 it is faster).
func times(r float64) string {
	switch {
	case r <= 0 || math.IsNaN(r) || math.IsInf(r, 0):
		return ""
	case r < 10:
		return fmt.Sprintf("%.2gx", r)
	default:
		return fmt.Sprintf("%.0fx", r)
	}
}

func count(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// WriteMapTable prints the map comparison: each workload's mean time per
// operation and its ratio to the best offmap row in that column, the data
// on disk, and the two-process counters.
func WriteMapTable(w io.Writer, rs []MapResult, cfg MapConfig) {
	var best [workloads]float64
	var bestRate float64
	var offmapDisk int64
	for _, r := range rs {
		if !strings.HasPrefix(r.Peer.ID, "offmap") || r.Err != nil {
			continue
		}
		for k := range workloads {
			if ns := r.Cells[k].NsPerOp(); ns > 0 && (best[k] == 0 || ns < best[k]) {
				best[k] = ns
			}
		}
		if r.Two.Checked && r.Two.Rate() > bestRate {
			bestRate = r.Two.Rate()
		}
		if r.Peer.Disk && offmapDisk == 0 {
			offmapDisk = r.Allocated
		}
	}
	fmt.Fprintf(w, "| peer | insert | get | update | incr | on disk, MiB (ls / du) | 2 processes, %s counters, M incr/s |\n", count(cfg.Counters))
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		row := []string{r.Peer.Name}
		for k := range workloads {
			c := r.Cells[k]
			switch {
			case !r.Peer.Runs[k]:
				row = append(row, "")
			case c.Ops == 0:
				row = append(row, "-")
			default:
				s := fmtNs(c.NsPerOp())
				if x := times(c.NsPerOp() / best[k]); x != "" {
					s += " (" + x + ")"
				}
				if c.Ops < cfg.Entries {
					s += fmt.Sprintf(" [%s ops]", count(c.Ops))
				}
				row = append(row, s)
			}
		}
		switch {
		case r.Peer.Disk && r.Allocated > 0:
			s := mib(r.Apparent) + " / " + mib(r.Allocated)
			if offmapDisk > 0 {
				s += " (" + times(float64(r.Allocated)/float64(offmapDisk)) + ")"
			}
			row = append(row, s)
		case r.Peer.Disk:
			row = append(row, "-")
		case r.Peer.Memory:
			row = append(row, "in memory only")
		default:
			row = append(row, "")
		}
		t := r.Two
		switch {
		case t.Cannot != "":
			row = append(row, t.Cannot)
		case t.Err != nil:
			row = append(row, "error: "+t.Err.Error())
		case t.Checked:
			s := fmt.Sprintf("%.3g", t.Rate()/1e6)
			if bestRate > 0 {
				s += " (" + times(bestRate/t.Rate()) + ")"
			}
			if t.Total < cfg.Increments {
				s += fmt.Sprintf(" [%s incr]", count(t.Total))
			}
			row = append(row, s+", sum exact")
		default:
			row = append(row, "-")
		}
		if r.Err != nil {
			row = []string{r.Peer.Name, "error: " + r.Err.Error(), "", "", "", "", ""}
		}
		fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
	}
	fmt.Fprintf(w, "\nMean time per operation, one goroutine, %s entries of 16-byte keys and 8-byte values, keys in random order. "+
		"(Nx) is N times the best offmap row's time in that column (for the two-process column, N times its time per increment). "+
		"[n ops] marks a workload stopped by the %v budget before it covered every entry. "+
		"Every entry was read back and checked after the run (insert, then update, then incr).\n",
		count(cfg.Entries), cfg.Budget)
}

// SweepName names a sweep's row.
func SweepName(s Sweep) string { return s.Transport.Name + ", " + s.Wait.String() }

// WriteOneInstance prints each sweep's first setting (one instance, if the
// counts start at 1), with its ratios to offmap's best in that column.
func WriteOneInstance(w io.Writer, sweeps []Sweep, cfg EDAConfig) {
	var ref *eda.Result // offmap's lowest p99.9 at the first count
	for _, s := range sweeps {
		if s.Transport.ID == "offmap" && len(s.Results) > 0 {
			if r := s.Results[0]; ref == nil || r.EndToEnd.P999 < ref.EndToEnd.P999 {
				ref = r
			}
		}
	}
	fmt.Fprintln(w, "| transport, wait | instances | p50 | p99 | p99.9 | worst | CPU % of a core | p99.9 vs offmap | CPU vs offmap |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range sweeps {
		if len(s.Results) == 0 {
			why := "did not run"
			if s.Err != nil {
				why = "error: " + s.Err.Error()
			}
			fmt.Fprintf(w, "| %s | %s |  |  |  |  |  |  |  |\n", SweepName(s), why)
			continue
		}
		r := s.Results[0]
		e := r.EndToEnd
		mark := ""
		if !Meets(r, cfg.SLA) {
			mark = " *"
		}
		var rp, rc string
		if ref != nil {
			rp = times(float64(e.P999) / float64(ref.EndToEnd.P999))
			rc = times(r.CPU.Percent / ref.CPU.Percent)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s%s | %s | %.0f | %s | %s |\n", SweepName(s), r.Instances,
			fmtMS(e.P50), fmtMS(e.P99), fmtMS(e.P999), mark, fmtMS(e.Worst), r.CPU.Percent, rp, rc)
	}
	fmt.Fprintf(w, "\nLatency from the scheduled send to the receiver after five services and six topics, "+
		"corrected for coordinated omission; %g messages a second per instance; CPU of every process of the run "+
		"(the in-process NATS server and kfake cluster included, redis-server added). Ratios are to offmap's row with the lowest p99.9. "+
		"* fails p99.9 < %v or lost messages.\n", cfg.Rate, cfg.SLA)
}

// WriteSweeps prints every setting of every sweep.
func WriteSweeps(w io.Writer, sweeps []Sweep, cfg EDAConfig) {
	fmt.Fprintln(w, "| transport, wait | instances | messages | p50 | p99 | p99.9 | worst | uncorrected p99.9 | CPU % | SLA |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, s := range sweeps {
		for _, r := range s.Results {
			e, u := r.EndToEnd, r.Uncorrected
			verdict := "meets"
			if !Meets(r, cfg.SLA) {
				verdict = "**fails**"
				if !r.OK() {
					verdict = fmt.Sprintf("**fails**: %d of %d delivered, %d bad", r.Delivered, r.Sent, r.Bad)
				}
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %.0f | %s |\n", SweepName(s), r.Instances,
				count(int(r.Messages())), fmtMS(e.P50), fmtMS(e.P99), fmtMS(e.P999), fmtMS(e.Worst), fmtMS(u.P999),
				r.CPU.Percent, verdict)
		}
		if s.Why != "" {
			fmt.Fprintf(w, "| %s | %s |  |  |  |  |  |  |  |  |\n", SweepName(s), s.Why)
		}
	}
}

// WriteHeadline prints, for each sweep, the largest instance count that met
// the SLA and the ratio of offmap's to it, the Chronicle EDA article's headline figure.
func WriteHeadline(w io.Writer, sweeps []Sweep, cfg EDAConfig) {
	offBest, offPark := Sweep{}, Sweep{}
	for _, s := range sweeps {
		if s.Transport.ID != "offmap" {
			continue
		}
		if s.Best > offBest.Best {
			offBest = s
		}
		if s.Wait == eda.Park {
			offPark = s
		}
	}
	bound := func(s Sweep) string {
		switch {
		case s.Err != nil:
			return "error: " + s.Err.Error()
		case s.Best == 0 && s.Failed > 0:
			return fmt.Sprintf("none (fails at %d)", s.Failed)
		case s.Failed > 0:
			return fmt.Sprintf("%d (fails at %d)", s.Best, s.Failed)
		case s.Why != "":
			return fmt.Sprintf("%d (%s)", s.Best, s.Why)
		default:
			return fmt.Sprintf("at least %d (the largest count tried)", s.Best)
		}
	}
	ratio := func(off, s Sweep) string {
		switch {
		case off.Best == 0 || s.Err != nil:
			return ""
		case s.Best == 0:
			return fmt.Sprintf("> %d", off.Best)
		}
		r := float64(off.Best) / float64(s.Best)
		if off.Failed == 0 {
			return fmt.Sprintf(">= %.3gx", r)
		}
		return fmt.Sprintf("%.3gx", r)
	}
	fmt.Fprintf(w, "| transport, wait | instances with p99.9 < %v | offmap (%s) ÷ this | offmap (park) ÷ this |\n", cfg.SLA, offBest.Wait)
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, s := range sweeps {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", SweepName(s), bound(s), ratio(offBest, s), ratio(offPark, s))
	}
	// The Chronicle EDA article's sentence, once per peer, with the peer's better mode.
	fmt.Fprintln(w)
	peers := map[string]Sweep{}
	var order []string
	for _, s := range sweeps {
		if s.Transport.ID == "offmap" || s.Err != nil {
			continue
		}
		p, ok := peers[s.Transport.ID]
		if !ok {
			order = append(order, s.Transport.ID)
		}
		if !ok || s.Best > p.Best {
			peers[s.Transport.ID] = s
		}
	}
	for _, id := range order {
		p := peers[id]
		if offBest.Best == 0 {
			break
		}
		if p.Best == 0 {
			fmt.Fprintf(w, "- offmap's queue (%s wait) ran %d instances within the SLA; %s met it at no count tried.\n",
				offBest.Wait, offBest.Best, p.Transport.Name)
			continue
		}
		fmt.Fprintf(w, "- offmap's queue (%s wait) ran %.3g times as many instances as %s (%s wait): %d against %d%s.\n",
			offBest.Wait, float64(offBest.Best)/float64(p.Best), p.Transport.Name, p.Wait, offBest.Best, p.Best, bracket(offBest, p))
	}
}

// bracket says between which ratios the true one lies, given that each
// sweep's limit lies between its last passing and first failing count.
func bracket(off, p Sweep) string {
	lo := float64(off.Best) / float64(max(p.Failed, p.Best))
	switch {
	case off.Failed == 0 && p.Failed == 0:
		return " (both passed every count tried: the ratio is unbounded either way)"
	case off.Failed == 0:
		return fmt.Sprintf(" (offmap passed every count tried: at least %.3gx)", lo)
	case p.Failed == 0:
		return fmt.Sprintf(" (the peer passed every count tried: at most %.3gx)", float64(off.Failed)/float64(p.Best))
	}
	hi := float64(off.Failed) / float64(p.Best)
	return fmt.Sprintf("; with the limits between the counts tried, the ratio lies between %.3gx and %.3gx", lo, hi)
}

// Budget describes a run's durations for the report.
func Budget(cfg EDAConfig) string {
	total := cfg.Warmup + time.Duration(cfg.Runs)*cfg.RunLength
	return fmt.Sprintf("%v warm-up + %d runs of %v (%v) per setting", cfg.Warmup, cfg.Runs, cfg.RunLength, total)
}
