package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/queue"
)

// stats --watch: the queue's append rate and each named tailer's rate and
// lag, refreshed every --interval, as 'nats stream info' and
// 'kafka-consumer-groups --describe' show them.

func init() {
	statsCommand.synopsis = "[--json] [--watch [flags]] DIR | --prometheus DIR..."
	statsCommand.help += `

With --watch it prints, every --interval (1s by default) until
interrupted or --count refreshes, a line with the time, the messages on
disk, the index after the last one and the append rate since the last
refresh, then one line per named tailer: its acknowledged index, its rate
(messages acknowledged per second since the last refresh), its lag in
messages and bytes, and the bound on the age of its oldest unacknowledged
message (AGE <=, as stats shows it). The rates count messages between
indexes (Queue.Count), exactly across cycle files; the first refresh has
no rate yet. With --json each refresh is one
JSON object on one line (rates null on the first).`
	statsCommand.examples += `
  # watch the append rate and the tailers' lag, every second
  offqueue stats --watch /var/queues/orders
  # 10 refreshes, 5 s apart, as JSON lines
  offqueue stats --watch --interval 5s --count 10 --json /var/queues/orders`
}

// watchFlags are the flags of stats --watch.
type watchFlags struct {
	watch    *bool
	interval *time.Duration
	count    *int
}

func defineWatchFlags(fs *flag.FlagSet) watchFlags {
	return watchFlags{
		watch:    fs.Bool("watch", false, "refresh every --interval, with rates"),
		interval: fs.Duration("interval", time.Second, "time between refreshes of --watch"),
		count:    fs.Int("count", 0, "stop --watch after this many refreshes (0: never)"),
	}
}

// check rejects --interval and --count without --watch, and bad values.
func (w watchFlags) check(c *cli) error {
	switch {
	case !*w.watch && (*w.count != 0 || *w.interval != time.Second):
		return c.usageError("--interval and --count go with --watch")
	case *w.interval <= 0:
		return c.usageError("--interval must be positive")
	case *w.count < 0:
		return c.usageError("--count must not be negative")
	}
	return nil
}

// watchJSON is one refresh of stats --watch --json.
type watchJSON struct {
	Time       time.Time         `json:"time"`
	Messages   uint64            `json:"messages"`    // on disk
	End        uint64            `json:"end_index"`   // after the last message
	AppendRate *float64          `json:"append_rate"` // messages per second; null on the first refresh
	Tailers    []watchTailerJSON `json:"tailers"`
}

type watchTailerJSON struct {
	Name  string   `json:"name"`
	Acked *uint64  `json:"acknowledged_index"` // null: nothing acknowledged
	Rate  *float64 `json:"rate"`               // acknowledged per second
	Lag   *int64   `json:"lag"`                // null: not counted
	// LagBytes and UnackedAgeMax are as in stats --json.
	LagBytes      *int64   `json:"lag_bytes"`
	UnackedAgeMax *float64 `json:"unacked_age_max_seconds"`
	Error         string   `json:"error,omitempty"`
}

// endIndex is the index after the last message of st's newest cycle.
func endIndex(st queue.Stats) uint64 {
	if len(st.Cycles) == 0 {
		return 0
	}
	c := st.Cycles[len(st.Cycles)-1]
	return queue.Index(c.Cycle, c.Messages)
}

func runWatch(c *cli, q *queue.Queue, w watchFlags, asJSON bool) error {
	var prevEnd uint64
	var prevAt time.Time
	prevAcked := map[string]uint64{}
	tick := time.NewTicker(*w.interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		st, err := q.Stats()
		if err != nil {
			return err
		}
		at := time.Now()
		out := watchJSON{Time: at.UTC(), End: endIndex(st), Tailers: []watchTailerJSON{}}
		for _, cy := range st.Cycles {
			out.Messages += uint64(cy.Messages)
		}
		dt := at.Sub(prevAt).Seconds()
		rate := func(from, to uint64) *float64 {
			if n == 1 || dt <= 0 {
				return nil
			}
			k, err := q.Count(from, to)
			if err != nil {
				return nil
			}
			r := float64(k) / dt
			return &r
		}
		out.AppendRate = rate(prevEnd, out.End)
		acked := map[string]uint64{}
		for _, t := range st.Tailers {
			tj := watchTailerJSON{Name: t.Name}
			if t.Err != nil {
				tj.Error = message(t.Err)
				out.Tailers = append(out.Tailers, tj)
				continue
			}
			if t.Any {
				a := t.Acked
				tj.Acked = &a
				acked[t.Name] = a
				if p, ok := prevAcked[t.Name]; ok {
					tj.Rate = rate(p, a)
				}
			}
			if t.Lag >= 0 {
				lag := t.Lag
				tj.Lag = &lag
			}
			if t.LagBytes >= 0 {
				b := t.LagBytes
				tj.LagBytes = &b
			}
			if !t.UnackedSince.IsZero() {
				age := max(0, at.Sub(t.UnackedSince).Seconds())
				tj.UnackedAgeMax = &age
			}
			out.Tailers = append(out.Tailers, tj)
		}
		if asJSON {
			if err := json.NewEncoder(c.stdout).Encode(out); err != nil {
				return err
			}
		} else {
			writeWatch(c, out)
		}
		if err := c.stdout.Flush(); err != nil {
			return err
		}
		if *w.count != 0 && n >= *w.count {
			return nil
		}
		prevEnd, prevAt, prevAcked = out.End, at, acked
		<-tick.C
	}
}

func writeWatch(c *cli, out watchJSON) {
	w := c.stdout
	fmt.Fprintf(w, "%s  messages %d  end %s  append %s\n", out.Time.Format("2006-01-02T15:04:05Z"), out.Messages, formatIndex(out.End), rateText(out.AppendRate))
	if len(out.Tailers) == 0 {
		return
	}
	fmt.Fprintf(w, "  %-20s %-22s %12s %14s %11s %10s\n", "TAILER", "ACKNOWLEDGED", "RATE", "LAG", "LAG BYTES", "AGE <=")
	for _, t := range out.Tailers {
		if t.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", t.Error)
			continue
		}
		acked, lag, bytes, age := "-", "unknown", "unknown", "-"
		if t.Acked != nil {
			acked = formatIndex(*t.Acked)
		}
		if t.Lag != nil {
			lag = strconv.FormatInt(*t.Lag, 10)
		}
		if t.LagBytes != nil {
			bytes = cliargs.FormatSize(*t.LagBytes)
		}
		if t.UnackedAgeMax != nil {
			age = ageText(*t.UnackedAgeMax)
		}
		fmt.Fprintf(w, "  %-20s %-22s %12s %14s %11s %10s\n", t.Name, acked, rateText(t.Rate), lag, bytes, age)
	}
}

func rateText(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r, 'f', 1, 64) + "/s"
}
