package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/offmap/offmap/offmap"
)

var statCommand = command{
	name:     "stat",
	synopsis: "[--json] [--segments] FILE",
	summary:  "show a map's layout, fill and locks",
	help: `Stat shows a map's layout and format version, its capacity, entries and
bytes used, the fill of its segments, and who holds segment locks: a live
process (a write in progress) or a dead one (the next writer takes the
lock over and repairs the segment; 'offmap recover' does it now). It opens
the file read-only and changes nothing.

Each segment holds at most "max per segment" entries; a map is full when
one segment is, so the fullest segment matters more than the average.`,
	examples: `  offmap stat clients.map
  # every segment, not just a summary
  offmap stat --segments clients.map
  # the fullest segment's fill, with jq
  offmap stat --json clients.map | jq '[.segments[].entry_fill] | max'`,
	run: runStat,
}

// statJSON is stat --json's output.
type statJSON struct {
	Path             string        `json:"path"`
	FormatVersion    int           `json:"format_version"`
	FileSize         int64         `json:"file_size"`
	Created          time.Time     `json:"created"`
	Capacity         int           `json:"capacity"`
	Entries          int           `json:"entries"`
	Detached         int           `json:"detached"`
	AverageKeySize   int           `json:"avg_key_size"`
	AverageValueSize int           `json:"avg_value_size"`
	MaxKeySize       int           `json:"max_key_size"`
	MaxValueSize     int           `json:"max_value_size"`
	Segments         int           `json:"segment_count"`
	SlotsPerSegment  int           `json:"slots_per_segment"`
	MaxPerSegment    int           `json:"max_per_segment"`
	ChunkSize        int           `json:"chunk_size"`
	ChunksPerSegment int           `json:"chunks_per_segment"`
	EntrySpace       int64         `json:"entry_space"`
	BytesUsed        int64         `json:"bytes_used"`
	PerSegment       []segmentJSON `json:"segments"`
}

type segmentJSON struct {
	Index      int     `json:"index"`
	Entries    int     `json:"entries"`
	Detached   int     `json:"detached"`
	BytesUsed  int64   `json:"bytes_used"`
	EntryFill  float64 `json:"entry_fill"` // (entries + detached) / max per segment
	SpaceFill  float64 `json:"space_fill"` // bytes used / entry space of a segment
	LockHolder int     `json:"lock_holder,omitempty"`
	HolderDead bool    `json:"holder_dead,omitempty"`
	Writing    bool    `json:"writing,omitempty"`      // version odd: a write is in progress or was cut off
	RedoRecord bool    `json:"redo_pending,omitempty"` // an in-place update is pending
}

func runStat(c *cli, args []string) error {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "print JSON, with every segment")
	all := fs.Bool("segments", false, "list every segment (by default only when there are at most 64)")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
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
		Path: st.Path, FormatVersion: st.FormatVersion, FileSize: st.FileSize, Created: st.Created,
		Capacity: st.Capacity, Entries: st.Len, Detached: st.Detached,
		AverageKeySize: st.AverageKeySize, AverageValueSize: st.AverageValueSize,
		MaxKeySize: st.MaxKeySize, MaxValueSize: st.MaxValueSize,
		Segments: st.Segments, SlotsPerSegment: st.SlotsPerSegment, MaxPerSegment: st.MaxPerSegment,
		ChunkSize: st.ChunkSize, ChunksPerSegment: st.ChunksPerSegment,
		EntrySpace: st.EntrySpace, BytesUsed: st.BytesUsed,
	}
	segSpace := float64(st.ChunkSize) * float64(st.ChunksPerSegment)
	for i, s := range st.PerSegment {
		out.PerSegment = append(out.PerSegment, segmentJSON{
			Index: i, Entries: s.Entries, Detached: s.Detached, BytesUsed: s.BytesUsed,
			EntryFill:  float64(s.Entries+s.Detached) / float64(st.MaxPerSegment),
			SpaceFill:  float64(s.BytesUsed) / segSpace,
			LockHolder: s.LockHolder, HolderDead: s.HolderDead,
			Writing:    s.Writing,
			RedoRecord: s.RedoPending,
		})
	}
	return out
}

func printStat(c *cli, st statJSON, perSegment bool) {
	w := c.stdout
	pct := func(a, b float64) string { return fmt.Sprintf("%.1f%%", 100*a/b) }
	fmt.Fprintf(w, "file           %s\n", st.Path)
	fmt.Fprintf(w, "format         version %d, created %s, %d bytes (%s)\n",
		st.FormatVersion, st.Created.Format(time.RFC3339), st.FileSize, humanBytes(st.FileSize))
	fmt.Fprintf(w, "capacity       %d entries\n", st.Capacity)
	fmt.Fprintf(w, "entries        %d (%s of capacity), %d detached\n",
		st.Entries, pct(float64(st.Entries), float64(st.Capacity)), st.Detached)
	fmt.Fprintf(w, "bytes used     %d of %d bytes of entry space (%s)\n",
		st.BytesUsed, st.EntrySpace, pct(float64(st.BytesUsed), float64(st.EntrySpace)))
	fmt.Fprintf(w, "keys           average %d, at most %d bytes\n", st.AverageKeySize, st.MaxKeySize)
	fmt.Fprintf(w, "values         average %d, at most %d bytes\n", st.AverageValueSize, st.MaxValueSize)
	fmt.Fprintf(w, "segments       %d, each %d slots, at most %d entries, %d chunks of %d bytes\n",
		st.Segments, st.SlotsPerSegment, st.MaxPerSegment, st.ChunksPerSegment, st.ChunkSize)
	if len(st.PerSegment) == 0 {
		return
	}
	fills := make([]float64, len(st.PerSegment))
	for i, s := range st.PerSegment {
		fills[i] = s.EntryFill
	}
	slices.Sort(fills)
	fmt.Fprintf(w, "segment fill   entries: min %.1f%%, median %.1f%%, max %.1f%% of max per segment\n",
		100*fills[0], 100*fills[len(fills)/2], 100*fills[len(fills)-1])
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
	fmt.Fprintf(w, "\nsegment  entries  detached  entry fill  bytes used  space fill  lock\n")
	for _, s := range st.PerSegment {
		lock := "-"
		if s.LockHolder != 0 || s.Writing || s.RedoRecord {
			lock = lockState(s)
		}
		fmt.Fprintf(w, "%7d  %7d  %8d  %9.1f%%  %10d  %9.1f%%  %s\n",
			s.Index, s.Entries, s.Detached, 100*s.EntryFill, s.BytesUsed, 100*s.SpaceFill, lock)
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
