package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/offmap"
)

var statCommand = command{
	name:     "stat",
	synopsis: "[--json] [--segments] FILE | --prometheus FILE...",
	summary:  "show a map's layout, growth, fill and locks",
	help: `Stat shows a map's layout and format version; its file size now, when
created and at most; how far it grew (slot tables moved to larger ones,
extents of entry space added, and the bytes growth left unused, which
'offmap copy' reclaims); the room it was created with, entries and
bytes used; the fill of its segments; and who holds segment locks: a live
process (a write in progress) or a dead one (the next writer takes the
lock over and repairs the segment; 'offmap recover' does it now). Its
events line counts, for every process since the file was made, the
segment locks taken over from dead holders, the segments repaired and
the expired entries removed (counters in the file's header; a file whose
writers predate them counts from when newer ones began). It opens the
file read-only and changes nothing.

With --prometheus it prints the metrics of each FILE in the Prometheus
text exposition format instead (docs/METRICS.md: offmap_map_entries,
offmap_map_lock_takeovers_total and the others, labelled with the path
as given), for node_exporter's textfile collector or a cron job. If a
FILE cannot be read it prints nothing and exits 2, so that a file it
writes is never half of a scrape.

A segment's entry fill is its entries (detached included) over what its
slot table takes before it moves to one twice as large; its space fill
is its bytes used over its entry space, which grows by an extent as it
fills. Both grow the file, until it reaches its maximum size: then the
map is full.`,
	examples: `  offmap stat clients.map
  # every segment, not just a summary
  offmap stat --segments clients.map
  # how far the map grew, with jq
  offmap stat --json clients.map | jq '{file_size, unused_bytes}'
  # metrics of two maps for node_exporter's textfile collector
  cd /var/lib/node_exporter
  offmap stat --prometheus /srv/clients.map /srv/orders.map >offmap.prom.$$ &&
    mv offmap.prom.$$ offmap.prom`,
	run: runStat,
}

// statJSON is stat --json's output.
type statJSON struct {
	Path             string        `json:"path"`
	FormatVersion    int           `json:"format_version"`
	FileSize         int64         `json:"file_size"`       // now
	StartFileSize    int64         `json:"start_file_size"` // when created
	MaxFileSize      int64         `json:"max_file_size"`   // the file grows no further
	Created          time.Time     `json:"created"`
	Capacity         int           `json:"capacity"` // entries the map was created for
	Entries          int           `json:"entries"`
	Detached         int           `json:"detached"`
	AverageKeySize   int           `json:"avg_key_size"`
	AverageValueSize int           `json:"avg_value_size"`
	MaxKeySize       int           `json:"max_key_size"`
	MaxValueSize     int           `json:"max_value_size"`
	Segments         int           `json:"segment_count"`
	SlotsPerSegment  int           `json:"slots_per_segment"` // in each segment's first slot table
	MaxPerSegment    int           `json:"max_per_segment"`   // entries a segment took before its first growth
	ChunkSize        int           `json:"chunk_size"`
	ChunksPerSegment int           `json:"chunks_per_segment"` // in each segment's first extent
	EntrySpace       int64         `json:"entry_space"`
	BytesUsed        int64         `json:"bytes_used"`
	TablesGrown      int           `json:"tables_grown"`
	ExtentsAdded     int           `json:"extents_added"`
	UnusedBytes      int64         `json:"unused_bytes"`   // growth no segment uses: offmap copy reclaims it
	ReusableBytes    int64         `json:"reusable_bytes"` // of it, freed tables the next growth takes first
	Reused           int           `json:"reused"`         // growth steps that took freed space
	ChecksumEntries  bool          `json:"checksum_entries"`
	Expiring         bool          `json:"expiring"`
	TTL              time.Duration `json:"ttl_ns"`
	Expired          int           `json:"expired"` // expired entries that 'offmap sweep' would delete
	// Events of every process since the file was made (header counters).
	LockTakeovers  int `json:"lock_takeovers"`  // segment locks taken over from a dead holder
	Repairs        int `json:"repairs"`         // segments repaired after a dead holder or damage
	ExpiredRemoved int `json:"expired_removed"` // expired entries deleted by writers and sweeps
	// A map that evicts: its bound, and the counters of every process.
	Evict        bool          `json:"evict"`
	EvictBound   int           `json:"evict_bound,omitempty"` // entries at most
	Hits         int64         `json:"hits"`
	Misses       int64         `json:"misses"`
	Evictions    int64         `json:"evictions"`
	EvictedBytes int64         `json:"evicted_bytes"`
	PerSegment   []segmentJSON `json:"segments"`
}

type segmentJSON struct {
	Index      int     `json:"index"`
	Entries    int     `json:"entries"`
	Detached   int     `json:"detached"`
	Slots      int     `json:"slots"`       // in its slot table now
	MaxEntries int     `json:"max_entries"` // before its slot table grows
	Extents    int     `json:"extents"`     // pieces of entry space
	EntrySpace int64   `json:"entry_space"`
	BytesUsed  int64   `json:"bytes_used"`
	EntryFill  float64 `json:"entry_fill"` // (entries + detached) / max entries
	SpaceFill  float64 `json:"space_fill"` // bytes used / entry space
	LockHolder int     `json:"lock_holder,omitempty"`
	HolderDead bool    `json:"holder_dead,omitempty"`
	Writing    bool    `json:"writing,omitempty"`      // version odd: a write is in progress or was cut off
	RedoRecord bool    `json:"redo_pending,omitempty"` // an in-place update is pending
}

func runStat(c *cli, args []string) error {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "print JSON, with every segment")
	all := fs.Bool("segments", false, "list every segment (by default only when there are at most 64)")
	prom := fs.Bool("prometheus", false, "print the metrics of each FILE in the Prometheus text format")
	pos, err := c.parse(fs, args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	if *prom {
		if *asJSON || *all {
			return c.usageError("--prometheus prints neither JSON nor segments")
		}
		return printPrometheus(c, pos)
	}
	if len(pos) != 1 {
		return c.usageError("wrong number of arguments; usage: offmap %s %s", c.cmd.name, c.cmd.synopsis)
	}
	m, err := openMap(pos[0], readOnly)
	if err != nil {
		return err
	}
	defer m.Close()
	out := statOf(m.Stats())
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printStat(c, out, *all || out.Segments <= 64)
	return nil
}

func statOf(st offmap.Stats) statJSON {
	out := statJSON{
		Path: st.Path, FormatVersion: st.FormatVersion, Created: st.Created,
		FileSize: st.FileSize, StartFileSize: st.StartFileSize, MaxFileSize: st.MaxFileSize,
		Capacity: st.Capacity, Entries: st.Len, Detached: st.Detached,
		AverageKeySize: st.AverageKeySize, AverageValueSize: st.AverageValueSize,
		MaxKeySize: st.MaxKeySize, MaxValueSize: st.MaxValueSize,
		Segments: st.Segments, SlotsPerSegment: st.SlotsPerSegment, MaxPerSegment: st.MaxPerSegment,
		ChunkSize: st.ChunkSize, ChunksPerSegment: st.ChunksPerSegment,
		EntrySpace: st.EntrySpace, BytesUsed: st.BytesUsed,
		TablesGrown: st.TablesGrown, ExtentsAdded: st.ExtentsAdded, UnusedBytes: st.UnusedBytes, ReusableBytes: st.ReusableBytes, Reused: st.Reused,
		ChecksumEntries: st.ChecksumEntries,
		Expiring:        st.Expiring, TTL: st.TTL, Expired: st.Expired,
		LockTakeovers: st.LockTakeovers, Repairs: st.Repairs, ExpiredRemoved: st.ExpiredRemoved,
		Evict: st.Evict, EvictBound: st.EvictBound,
		Hits: st.Hits, Misses: st.Misses, Evictions: st.Evictions, EvictedBytes: st.EvictedBytes,
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	for i, s := range st.PerSegment {
		out.PerSegment = append(out.PerSegment, segmentJSON{
			Index: i, Entries: s.Entries, Detached: s.Detached,
			Slots: s.Slots, MaxEntries: s.MaxEntries, Extents: s.Extents, EntrySpace: s.EntrySpace,
			BytesUsed:  s.BytesUsed,
			EntryFill:  ratio(float64(s.Entries+s.Detached), float64(s.MaxEntries)),
			SpaceFill:  ratio(float64(s.BytesUsed), float64(s.EntrySpace)),
			LockHolder: s.LockHolder, HolderDead: s.HolderDead,
			Writing:    s.Writing,
			RedoRecord: s.RedoPending,
		})
	}
	return out
}

func printStat(c *cli, st statJSON, perSegment bool) {
	w := c.stdout
	pct := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*a/b)
	}
	sized := func(n int64) string { return fmt.Sprintf("%d bytes (%s)", n, cliargs.FormatSize(n)) }
	fmt.Fprintf(w, "file           %s\n", st.Path)
	sums := ""
	if st.ChecksumEntries {
		sums = ", entries checksummed"
	}
	fmt.Fprintf(w, "format         version %d, created %s%s\n", st.FormatVersion, st.Created.Format(time.RFC3339), sums)
	fmt.Fprintf(w, "file size      %s now, %s when created, at most %s\n",
		sized(st.FileSize), cliargs.FormatSize(st.StartFileSize), cliargs.FormatSize(st.MaxFileSize))
	growth := fmt.Sprintf("%d slot tables grown, %d extents added", st.TablesGrown, st.ExtentsAdded)
	if st.Reused > 0 {
		growth += fmt.Sprintf(" (%d in freed tables)", st.Reused)
	}
	if st.UnusedBytes > 0 {
		growth += fmt.Sprintf(", %s unused ('offmap copy' reclaims it)", sized(st.UnusedBytes))
		if st.ReusableBytes > 0 {
			growth += fmt.Sprintf(", of which growth reuses %s first", cliargs.FormatSize(st.ReusableBytes))
		}
	}
	fmt.Fprintf(w, "growth         %s\n", growth)
	if st.Expiring {
		ttl := "no default time to live"
		if st.TTL > 0 {
			ttl = "time to live " + st.TTL.String()
		}
		fmt.Fprintf(w, "expiry         %s; %d entries expired, awaiting 'offmap sweep'\n", ttl, st.Expired)
	}
	if st.Evict {
		fmt.Fprintf(w, "eviction       S3-FIFO, at most %d entries and %s; %d hits, %d misses (%s hits), %d evicted (%s)\n",
			st.EvictBound, cliargs.FormatSize(st.MaxFileSize), st.Hits, st.Misses,
			pct(float64(st.Hits), float64(st.Hits+st.Misses)), st.Evictions, sized(st.EvictedBytes))
	}
	fmt.Fprintf(w, "events         %d lock takeovers of dead holders, %d segments repaired, %d expired entries removed\n",
		st.LockTakeovers, st.Repairs, st.ExpiredRemoved)
	fmt.Fprintf(w, "starting room  %d entries when created (the map grows past them)\n", st.Capacity)
	fmt.Fprintf(w, "entries        %d, %d detached\n", st.Entries, st.Detached)
	fmt.Fprintf(w, "bytes used     %d of %d bytes of entry space (%s)\n",
		st.BytesUsed, st.EntrySpace, pct(float64(st.BytesUsed), float64(st.EntrySpace)))
	fmt.Fprintf(w, "keys           average %d, at most %d bytes\n", st.AverageKeySize, st.MaxKeySize)
	fmt.Fprintf(w, "values         average %d, at most %d bytes\n", st.AverageValueSize, st.MaxValueSize)
	fmt.Fprintf(w, "segments       %d, each first %d slots for at most %d entries, %d chunks of %d bytes\n",
		st.Segments, st.SlotsPerSegment, st.MaxPerSegment, st.ChunksPerSegment, st.ChunkSize)
	if len(st.PerSegment) == 0 {
		return
	}
	fills := make([]float64, len(st.PerSegment))
	spaces := make([]float64, len(st.PerSegment))
	for i, s := range st.PerSegment {
		fills[i], spaces[i] = s.EntryFill, s.SpaceFill
	}
	slices.Sort(fills)
	slices.Sort(spaces)
	mid := len(fills) / 2
	fmt.Fprintf(w, "segment fill   entries: min %.1f%%, median %.1f%%, max %.1f%% of their slot tables' limits\n",
		100*fills[0], 100*fills[mid], 100*fills[len(fills)-1])
	fmt.Fprintf(w, "               space: min %.1f%%, median %.1f%%, max %.1f%% of their entry space\n",
		100*spaces[0], 100*spaces[mid], 100*spaces[len(spaces)-1])
	locks := 0
	for _, s := range st.PerSegment {
		if s.LockHolder == 0 && !s.Writing && !s.RedoRecord {
			continue
		}
		locks++
		fmt.Fprintf(w, "lock           segment %d: %s\n", s.Index, lockState(s))
	}
	if locks == 0 {
		fmt.Fprintf(w, "locks          none held\n")
	}
	if !perSegment {
		fmt.Fprintf(w, "(--segments lists all %d segments)\n", st.Segments)
		return
	}
	fmt.Fprintf(w, "\nsegment  entries  detached    slots  max entries  entry fill  extents  entry space  bytes used  space fill  lock\n")
	for _, s := range st.PerSegment {
		lock := "-"
		if s.LockHolder != 0 || s.Writing || s.RedoRecord {
			lock = lockState(s)
		}
		fmt.Fprintf(w, "%7d  %7d  %8d  %7d  %11d  %9.1f%%  %7d  %11d  %10d  %9.1f%%  %s\n",
			s.Index, s.Entries, s.Detached, s.Slots, s.MaxEntries, 100*s.EntryFill,
			s.Extents, s.EntrySpace, s.BytesUsed, 100*s.SpaceFill, lock)
	}
}

// lockState describes a segment's lock and seqlock state.
func lockState(s segmentJSON) string {
	var d string
	switch {
	case s.LockHolder != 0 && s.HolderDead:
		d = fmt.Sprintf("held by dead process %d (the next writer takes it over; 'offmap recover' repairs now)", s.LockHolder)
	case s.LockHolder != 0:
		d = fmt.Sprintf("held by live process %d", s.LockHolder)
	default:
		d = "free"
	}
	if s.Writing {
		d += ", write in progress or cut off (version odd)"
	}
	if s.RedoRecord {
		d += ", in-place update pending (redo record)"
	}
	return d
}
