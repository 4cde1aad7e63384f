package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/queue"
)

var statsCommand = command{
	name:     "stats",
	synopsis: "[--json] DIR | --prometheus DIR...",
	summary:  "show the queue's settings, cycle files, writers and named tailers",
	help: `Stats prints the queue's settings (format version, roll cycle, index
spacing, the size limit of a cycle file, when it was created, in RFC 3339
and UTC), the processes holding writer leases (how many, and their pids),
how many processes watch for appends, one line per cycle file (its CYCLE
number, messages, bytes used, file size, and whether it is open, sealed
or unreadable), the total message count, and for each named tailer how
far it has acknowledged (CYCLE:SEQ, the index it reads first when opened
again) and its lag: the messages after that index, counted across cycle
files (those retention deleted count nothing; a slot skipped after its
writer died counts, as it takes an index), the bytes of their slots
(headers, padding and index arrays included: what the tailer has left to
read), and a bound on the age of the oldest message it has not
acknowledged: messages carry no time, so this is the age of the cycle
file that holds it (the message is at most that old; the shorter the
roll cycle, the closer the bound). The skipped line counts the slots
that tailers of every process skipped because their writer died before
committing them, since the queue was made (a counter in queue.meta).
Sizes are in binary units (KiB, MiB, GiB).

With --json it prints the same as one JSON object; a named tailer's
position is there as acknowledged_up_to ("CYCLE:SEQ") and as numbers:
acknowledged_cycle, acknowledged_seq and acknowledged_index (cycle << 32
| seq, above 2^53 for secondly and fast queues after some weeks, so
readers that keep numbers as doubles use the cycle and seq), its lag as
lag and lag_bytes (null when they could not be counted), and the bound on
its oldest unacknowledged message's age as unacked_since (when that
message's cycle file was made, RFC 3339) and unacked_age_max_seconds
(both null when nothing is unacknowledged). A cycle's created is when
its file was made. It opens the queue
read-only and changes nothing. When a cycle file or a named-tailer slot
cannot be read (damaged, or truncated while in use), it prints the rest,
says which, and exits 2.

With --prometheus it prints the metrics of each DIR in the Prometheus
text exposition format instead (docs/METRICS.md: offmap_queue_messages,
offmap_queue_tailer_lag_messages and the others, labelled with the
directory as given), for node_exporter's textfile collector or a cron
job. If a part of a queue cannot be read it prints nothing and exits 2,
so that a file it writes is never half of a scrape.`,
	examples: `  offqueue stats /var/queues/orders
  # the messages of each cycle file, with jq
  offqueue stats --json /var/queues/orders | jq '.cycles[].messages'
  # the lag of each named tailer
  offqueue stats --json /var/queues/orders | jq '.tailers[] | {name, lag}'
  # metrics for node_exporter's textfile collector
  cd /var/lib/node_exporter
  offqueue stats --prometheus /var/queues/orders >offqueue.prom.$$ &&
    mv offqueue.prom.$$ offqueue.prom`,
	run: runStats,
}

// statsJSON is stats --json's output.
type statsJSON struct {
	Dir           string       `json:"dir"`
	FormatVersion int          `json:"format_version"`
	Roll          string       `json:"roll"`
	IndexSpacing  int          `json:"index_spacing"`
	MaxCycleSize  int64        `json:"max_cycle_size"`
	Created       time.Time    `json:"created"`
	Checksums     bool         `json:"checksum_messages"`
	Wakeups       string       `json:"wakeups"`  // how a process asleep in Wait is woken by another's append
	Writers       []int        `json:"writers"`  // pids holding a writer lease
	Watchers      int          `json:"watchers"` // processes watching for appends
	Cycles        []cycleJSON  `json:"cycles"`
	Messages      uint64       `json:"messages"`
	Tailers       []tailerJSON `json:"tailers"`
	SkippedSlots  uint64       `json:"skipped_slots"` // of dead writers, by every process since the queue was made
}

type cycleJSON struct {
	Cycle     uint32     `json:"cycle"`
	File      string     `json:"file"`
	Created   *time.Time `json:"created"` // null: unread
	FileSize  int64      `json:"file_size"`
	Messages  uint32     `json:"messages"`
	BytesUsed int64      `json:"bytes_used"`
	State     string     `json:"state"` // open, sealed or error
	Error     string     `json:"error,omitempty"`
}

type tailerJSON struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"` // the slot is damaged`
	// AckedUpTo is the index CYCLE:SEQ that the tailer will read first
	// when opened again: every message before it is acknowledged. Null
	// when nothing was; so are the numbers that follow.
	AckedUpTo  *string `json:"acknowledged_up_to"`
	AckedCycle *uint32 `json:"acknowledged_cycle"`
	AckedSeq   *uint32 `json:"acknowledged_seq"`
	AckedIndex *uint64 `json:"acknowledged_index"` // cycle << 32 | seq
	Lag        *int64  `json:"lag"`                // messages after it; null: not counted
	LagBytes   *int64  `json:"lag_bytes"`          // their slots' bytes; null: not counted
	// UnackedSince is when the cycle file holding the oldest message not
	// acknowledged was made: that message is no older. Null when there
	// is none; so is the age.
	UnackedSince  *time.Time `json:"unacked_since"`
	UnackedAgeMax *float64   `json:"unacked_age_max_seconds"`
}

func runStats(c *cli, args []string) error {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "print one JSON object")
	wf := defineWatchFlags(fs)
	prom := fs.Bool("prometheus", false, "print the metrics of each DIR in the Prometheus text format")
	pos, err := c.parse(fs, args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	if err := wf.check(c); err != nil {
		return err
	}
	if *prom {
		if *asJSON || *wf.watch {
			return c.usageError("--prometheus prints no JSON and does not --watch")
		}
		return printPrometheus(c, pos)
	}
	if len(pos) != 1 {
		return c.usageError("wrong number of arguments; usage: offqueue %s %s", c.cmd.name, c.cmd.synopsis)
	}
	q, err := openQueue(pos[0])
	if err != nil {
		return err
	}
	defer q.Close()
	if *wf.watch {
		return runWatch(c, q, wf, *asJSON)
	}
	st, err := q.Stats()
	if err != nil {
		return err
	}
	out := statsOf(st, time.Now())
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
		return damaged(st)
	}
	w := c.stdout
	fmt.Fprintf(w, "queue      %s\nformat     %d\nroll       %s\nspacing    %d\nmax cycle  %s\ncreated    %s\n",
		out.Dir, out.FormatVersion, out.Roll, out.IndexSpacing, cliargs.FormatSize(out.MaxCycleSize), out.Created.Format(time.RFC3339))
	fmt.Fprintf(w, "checksums  %s\n", map[bool]string{true: "every message", false: "none"}[out.Checksums])
	fmt.Fprintf(w, "writers    %s\nwatchers   %d\nwake-ups   %s\n", writersText(out.Writers), out.Watchers, out.Wakeups)
	fmt.Fprintf(w, "cycles     %d\n", len(out.Cycles))
	for _, c := range out.Cycles {
		state := c.State
		if c.Error != "" {
			state = "error: " + c.Error
		}
		fmt.Fprintf(w, "  %-10d %10d messages %11s used %11s file  %s\n", c.Cycle, c.Messages, cliargs.FormatSize(c.BytesUsed), cliargs.FormatSize(c.FileSize), state)
	}
	fmt.Fprintf(w, "messages   %d\n", out.Messages)
	fmt.Fprintf(w, "skipped    %d slots of dead writers\n", out.SkippedSlots)
	for _, t := range out.Tailers {
		pos := "nothing acknowledged"
		if t.AckedUpTo != nil {
			pos = "acknowledged up to " + *t.AckedUpTo
		}
		if t.Error != "" {
			fmt.Fprintf(w, "tailer     error: %s\n", t.Error)
			continue
		}
		lag := "unknown"
		if t.Lag != nil {
			lag = strconv.FormatInt(*t.Lag, 10) + " messages"
		}
		if t.LagBytes != nil {
			lag += " (" + cliargs.FormatSize(*t.LagBytes) + ")"
		}
		if t.UnackedAgeMax != nil {
			lag += ", the oldest unacknowledged at most " + ageText(*t.UnackedAgeMax) + " old"
		}
		fmt.Fprintf(w, "tailer     %s: %s, lag %s\n", t.Name, pos, lag)
	}
	return damaged(st)
}

// writersText is the writers line: none, 1 (pid 4711), 2 (pids 4711, 4712).
func writersText(pids []int) string {
	if len(pids) == 0 {
		return "none"
	}
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	word := "pid"
	if len(pids) > 1 {
		word = "pids"
	}
	return fmt.Sprintf("%d (%s %s)", len(pids), word, strings.Join(s, ", "))
}

// damaged ends stats with status 2, as a read error, when a part of the queue could not be
// read: a damaged or truncated cycle file, a damaged named-tailer slot. A
// cycle file deleted by retention between the listing and its reading
// is no damage.
func damaged(st queue.Stats) error {
	var parts []string
	for _, c := range st.Cycles {
		if c.Err != nil && !errors.Is(c.Err, fs.ErrNotExist) {
			parts = append(parts, filepath.Base(c.Path))
		}
	}
	for _, t := range st.Tailers {
		if t.Err != nil {
			parts = append(parts, "a named tailer")
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%d parts of the queue could not be read (%s); 'offqueue verify' lists the problems", len(parts), strings.Join(parts, ", "))
}

// ageText is an age in seconds, rounded to what a reader needs: 850ms,
// 42s, 3m12s, 5h4m0s.
func ageText(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// statsOf turns st into stats --json's object, with ages as of now.
func statsOf(st queue.Stats, now time.Time) statsJSON {
	out := statsJSON{
		Dir: st.Dir, FormatVersion: st.FormatVersion, Roll: st.Roll.String(),
		IndexSpacing: st.IndexSpacing, MaxCycleSize: st.MaxCycleSize,
		Created:   st.Created.UTC(),
		Checksums: st.ChecksumMessages,
		Wakeups:   st.Wakeups,
		Writers:   append([]int{}, st.Writers...),
		Watchers:  st.Watchers,
		Cycles:    []cycleJSON{},
		Tailers:   []tailerJSON{},
	}
	out.SkippedSlots = st.SkippedSlots
	for _, c := range st.Cycles {
		cj := cycleJSON{
			Cycle: c.Cycle, File: filepath.Base(c.Path), FileSize: c.FileSize,
			Messages: c.Messages, BytesUsed: c.BytesUsed, State: "open",
		}
		if !c.Created.IsZero() {
			t := c.Created.UTC()
			cj.Created = &t
		}
		if c.Sealed {
			cj.State = "sealed"
		}
		if c.Err != nil {
			cj.State, cj.Error = "error", message(c.Err)
		}
		out.Cycles = append(out.Cycles, cj)
		out.Messages += uint64(c.Messages)
	}
	for _, t := range st.Tailers {
		tj := tailerJSON{Name: t.Name}
		if t.Err != nil {
			tj.Error = message(t.Err)
		}
		if t.Any {
			s, idx := formatIndex(t.Acked), t.Acked
			c, q := queue.SplitIndex(t.Acked)
			tj.AckedUpTo, tj.AckedCycle, tj.AckedSeq, tj.AckedIndex = &s, &c, &q, &idx
		}
		if t.Err == nil && t.Lag >= 0 {
			lag := t.Lag
			tj.Lag = &lag
		}
		if t.Err == nil && t.LagBytes >= 0 {
			b := t.LagBytes
			tj.LagBytes = &b
		}
		if t.Err == nil && !t.UnackedSince.IsZero() {
			since := t.UnackedSince.UTC()
			age := max(0, now.Sub(since).Seconds())
			tj.UnackedSince, tj.UnackedAgeMax = &since, &age
		}
		out.Tailers = append(out.Tailers, tj)
	}
	return out
}
