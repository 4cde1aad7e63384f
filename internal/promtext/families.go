package promtext

import (
	"errors"
	"fmt"
	"os"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
)

// The metrics of a map, labelled with its path. Sizes are in bytes, the
// base unit; counters end in _total and count from the file's creation,
// across every process (docs/FORMAT.md, event counters).
var (
	MapEntries        = &Desc{"offmap_map_entries", "Live entries of the map (expired ones not yet removed included).", Gauge, []string{"path"}}
	MapUsedBytes      = &Desc{"offmap_map_used_bytes", "Bytes of entry space taken by entries.", Gauge, []string{"path"}}
	MapFileBytes      = &Desc{"offmap_map_file_bytes", "Size of the map file: its starting size and all growth so far.", Gauge, []string{"path"}}
	MapMaxFileBytes   = &Desc{"offmap_map_max_file_bytes", "Size the map file never grows past; at it, the map is full.", Gauge, []string{"path"}}
	MapGrowthSteps    = &Desc{"offmap_map_growth_steps_total", "Growth steps: slot tables moved to one twice as large and extents of entry space added.", Counter, []string{"path"}}
	MapLockTakeovers  = &Desc{"offmap_map_lock_takeovers_total", "Segment locks taken over from a dead holder, by every process.", Counter, []string{"path"}}
	MapRepairs        = &Desc{"offmap_map_repairs_total", "Segments repaired after a dead holder or damage, by every process.", Counter, []string{"path"}}
	MapExpiredEntries = &Desc{"offmap_map_expired_entries_total", "Expired entries removed by writers and sweeps, by every process.", Counter, []string{"path"}}
	MapHits           = &Desc{"offmap_map_hits_total", "Reads that found their key, in a map that evicts, by every process that may write the file.", Counter, []string{"path"}}
	MapMisses         = &Desc{"offmap_map_misses_total", "Reads that did not find their key, in a map that evicts, by every process that may write the file.", Counter, []string{"path"}}
	MapEvictions      = &Desc{"offmap_map_evictions_total", "Entries evicted to make room, by every process.", Counter, []string{"path"}}
	MapEvictedBytes   = &Desc{"offmap_map_evicted_bytes_total", "Bytes of entry space freed by evictions, by every process.", Counter, []string{"path"}}
)

// MapDescs lists the metrics of a map.
var MapDescs = []*Desc{MapEntries, MapUsedBytes, MapFileBytes, MapMaxFileBytes, MapGrowthSteps, MapLockTakeovers, MapRepairs, MapExpiredEntries,
	MapHits, MapMisses, MapEvictions, MapEvictedBytes}

// MapSamples are the samples of a map's Stats, labelled with path.
func MapSamples(path string, st offmap.Stats) []Sample {
	l := []string{path}
	return []Sample{
		{MapEntries, l, float64(st.Len)},
		{MapUsedBytes, l, float64(st.BytesUsed)},
		{MapFileBytes, l, float64(st.FileSize)},
		{MapMaxFileBytes, l, float64(st.MaxFileSize)},
		{MapGrowthSteps, l, float64(st.TablesGrown + st.ExtentsAdded)},
		{MapLockTakeovers, l, float64(st.LockTakeovers)},
		{MapRepairs, l, float64(st.Repairs)},
		{MapExpiredEntries, l, float64(st.ExpiredRemoved)},
		{MapHits, l, float64(st.Hits)},
		{MapMisses, l, float64(st.Misses)},
		{MapEvictions, l, float64(st.Evictions)},
		{MapEvictedBytes, l, float64(st.EvictedBytes)},
	}
}

// The metrics of a queue, labelled with its directory. A queue keeps no
// count of the messages ever appended (an append would have to add to a
// shared word), so what it reports is what is on disk: the messages and
// bytes of the cycle files retention kept, as gauges.
var (
	QueueMessages      = &Desc{"offmap_queue_messages", "Messages in the cycle files on disk (slots skipped after a dead writer included: each takes an index); retention lowers it.", Gauge, []string{"path"}}
	QueueBytes         = &Desc{"offmap_queue_bytes", "Bytes the cycle files on disk use for slots: messages with their headers and padding, index arrays.", Gauge, []string{"path"}}
	QueueFileBytes     = &Desc{"offmap_queue_file_bytes", "Size of the cycle files on disk.", Gauge, []string{"path"}}
	QueueCycles        = &Desc{"offmap_queue_cycles", "Cycle files on disk.", Gauge, []string{"path"}}
	QueueWriters       = &Desc{"offmap_queue_writers", "Processes holding a writer lease.", Gauge, []string{"path"}}
	QueueSkippedSlots  = &Desc{"offmap_queue_skipped_slots_total", "Slots skipped because their writer died before committing them, by every process.", Counter, []string{"path"}}
	TailerAckedIndex   = &Desc{"offmap_queue_tailer_acked_index", "Index (cycle << 32 | sequence) after a named tailer's last acknowledged message; absent while it has acknowledged none. Exact up to 2^53.", Gauge, []string{"path", "tailer"}}
	TailerLag          = &Desc{"offmap_queue_tailer_lag_messages", "Messages after a named tailer's acknowledged index, counted across cycle files.", Gauge, []string{"path", "tailer"}}
	TailerLagBytes     = &Desc{"offmap_queue_tailer_lag_bytes", "Bytes of the slots after a named tailer's acknowledged message (headers, padding and index arrays included), across cycle files.", Gauge, []string{"path", "tailer"}}
	TailerUnackedSince = &Desc{"offmap_queue_tailer_unacked_since_timestamp_seconds", "Creation time of the cycle file holding a named tailer's oldest unacknowledged message, which is no older; absent when none is unacknowledged.", Gauge, []string{"path", "tailer"}}
)

// QueueDescs lists the metrics of a queue.
var QueueDescs = []*Desc{QueueMessages, QueueBytes, QueueFileBytes, QueueCycles, QueueWriters, QueueSkippedSlots, TailerAckedIndex, TailerLag, TailerLagBytes, TailerUnackedSince}

// ErrUnreadable reports a part of a queue that Stats could not read: a
// damaged or truncated cycle file or named-tailer slot. The samples that
// depend on it are left out.
var ErrUnreadable = errors.New("part of the queue could not be read")

// QueueSamples are the samples of a queue's Stats, labelled with path,
// and an error wrapping ErrUnreadable that names each part Stats could
// not read (the samples that need it are left out). A cycle file that
// retention deleted between the listing and its reading is not an error.
func QueueSamples(path string, st queue.Stats) ([]Sample, error) {
	l := []string{path}
	var cycles, messages, bytes, files float64
	var errs []error
	for _, c := range st.Cycles {
		if errors.Is(c.Err, os.ErrNotExist) {
			continue
		}
		cycles++
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("%w: cycle %d: %v", ErrUnreadable, c.Cycle, c.Err))
			continue
		}
		messages += float64(c.Messages)
		bytes += float64(c.BytesUsed)
		files += float64(c.FileSize)
	}
	var s []Sample
	if len(errs) == 0 {
		s = append(s, Sample{QueueMessages, l, messages}, Sample{QueueBytes, l, bytes}, Sample{QueueFileBytes, l, files})
	}
	s = append(s,
		Sample{QueueCycles, l, cycles},
		Sample{QueueWriters, l, float64(len(st.Writers))},
		Sample{QueueSkippedSlots, l, float64(st.SkippedSlots)})
	for _, t := range st.Tailers {
		if t.Err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", ErrUnreadable, t.Err))
			continue
		}
		tl := []string{path, t.Name}
		if t.Any {
			s = append(s, Sample{TailerAckedIndex, tl, float64(t.Acked)})
		}
		if t.Lag >= 0 {
			s = append(s, Sample{TailerLag, tl, float64(t.Lag)})
		}
		if t.LagBytes >= 0 {
			s = append(s, Sample{TailerLagBytes, tl, float64(t.LagBytes)})
		}
		if !t.UnackedSince.IsZero() {
			s = append(s, Sample{TailerUnackedSince, tl, float64(t.UnackedSince.UnixNano()) / 1e9})
		}
	}
	return s, errors.Join(errs...)
}
