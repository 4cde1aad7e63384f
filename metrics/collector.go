// Package metrics exports the metrics of offmap maps and queues to
// Prometheus: a prometheus.Collector that reads each map's and queue's
// Stats when it is scraped. It is a module of its own so that the
// library's go.mod does not require client_golang.
//
// The metric names and labels are those of `offmap stat --prometheus`
// and `offqueue stats --prometheus` (docs/METRICS.md): per map
// offmap_map_entries{path}, offmap_map_used_bytes, offmap_map_file_bytes,
// offmap_map_max_file_bytes, offmap_map_growth_steps_total,
// offmap_map_lock_takeovers_total, offmap_map_repairs_total and
// offmap_map_expired_entries_total; per queue offmap_queue_messages{path},
// offmap_queue_bytes, offmap_queue_file_bytes, offmap_queue_cycles,
// offmap_queue_writers, offmap_queue_skipped_slots_total and, per named
// tailer, offmap_queue_tailer_acked_index{path,tailer} and
// offmap_queue_tailer_lag_messages{path,tailer}. The counters are kept in
// the files' headers, so they count the events of every process that uses
// a file, not only of the one that exports them.
//
// Collecting takes no lock that a map's or a queue's writers hold: Stats
// reads shared words atomically. A file that cannot be read (missing,
// damaged, truncated while mapped) is reported as an error of that
// collection, for its own metrics; the others are still collected.
package metrics

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/offmap/offmap/internal/promtext"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrDuplicate is returned when a map or queue is added a second time
// under the same path: its series would collide.
var ErrDuplicate = errors.New("metrics: path already added")

// ErrTimeout reports a map or queue whose Stats did not return within
// the collector's timeout (Collector.Timeout).
var ErrTimeout = errors.New("metrics: reading stats timed out")

// DefaultTimeout is how long a collection waits for one file's Stats.
const DefaultTimeout = 5 * time.Second

// Collector is a prometheus.Collector of maps and queues. Its methods may
// be called concurrently, and files may be added while it is registered.
type Collector struct {
	// Timeout bounds the time one map's or queue's Stats may take (0:
	// DefaultTimeout); set it before the collector is registered.
	// Opening a file by path waits while a process that had it open
	// alone finishes its recovery.
	Timeout time.Duration

	mu      sync.Mutex
	sources []source
	paths   map[string]bool
}

// source is one map or queue; stats returns its samples.
type source struct {
	path  string
	first *promtext.Desc // names the source's collection errors
	stats func() ([]promtext.Sample, error)
}

// NewCollector returns a collector of no files yet.
func NewCollector() *Collector {
	return &Collector{paths: make(map[string]bool)}
}

// AddMap adds the map file at path. Each collection opens it read-only,
// reads its Stats and closes it, so the file may be replaced (offmap
// copy) between scrapes; the path labels its series as given.
func (c *Collector) AddMap(path string) error {
	return c.add(source{path: path, first: promtext.MapEntries, stats: func() ([]promtext.Sample, error) {
		m, err := offmap.Open(path, offmap.Options{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer m.Close()
		return promtext.MapSamples(path, m.Stats()), nil
	}})
}

// AddOpenMap adds a map this process has open; its path as opened labels
// its series. The map must stay open while the collector is registered.
func (c *Collector) AddOpenMap(m *offmap.Map) error {
	path := m.Stats().Path
	return c.add(source{path: path, first: promtext.MapEntries, stats: func() ([]promtext.Sample, error) {
		st := m.Stats()
		if st.PerSegment == nil {
			return nil, fmt.Errorf("metrics: %s: %w", path, offmap.ErrClosed)
		}
		return promtext.MapSamples(path, st), nil
	}})
}

// AddQueue adds the queue in dir. Each collection opens it read-only,
// reads its Stats and closes it; the directory labels its series as
// given.
func (c *Collector) AddQueue(dir string) error {
	return c.add(source{path: dir, first: promtext.QueueMessages, stats: func() ([]promtext.Sample, error) {
		q, err := queue.Open(dir, queue.Options{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer q.Close()
		st, err := q.Stats()
		if err != nil {
			return nil, err
		}
		return promtext.QueueSamples(dir, st)
	}})
}

// AddOpenQueue adds a queue this process has open; its directory labels
// its series. The queue must stay open while the collector is registered.
func (c *Collector) AddOpenQueue(q *queue.Queue) error {
	dir := q.Dir()
	return c.add(source{path: dir, first: promtext.QueueMessages, stats: func() ([]promtext.Sample, error) {
		st, err := q.Stats()
		if err != nil {
			return nil, err
		}
		return promtext.QueueSamples(dir, st)
	}})
}

func (c *Collector) add(s source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paths == nil {
		c.paths = make(map[string]bool)
	}
	if c.paths[s.path] {
		return fmt.Errorf("%w: %s", ErrDuplicate, s.path)
	}
	c.paths[s.path] = true
	c.sources = append(c.sources, s)
	return nil
}

// descs maps the shared descriptions to client_golang's, made once.
var descs = func() map[*promtext.Desc]*prometheus.Desc {
	m := make(map[*promtext.Desc]*prometheus.Desc)
	for _, d := range append(append([]*promtext.Desc{}, promtext.MapDescs...), promtext.QueueDescs...) {
		m[d] = prometheus.NewDesc(d.Name, d.Help, d.Labels, nil)
	}
	return m
}()

// Describe sends the descriptions of every metric the collector may
// report.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range promtext.MapDescs {
		ch <- descs[d]
	}
	for _, d := range promtext.QueueDescs {
		ch <- descs[d]
	}
}

// Collect reads every file's Stats, each at most Timeout, one after the
// other, and sends their metrics; a file that fails sends an invalid
// metric carrying its error, which the registry reports for the scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := append([]source(nil), c.sources...)
	timeout := c.Timeout
	c.mu.Unlock()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	for _, s := range sources {
		samples, err := collectOne(s, timeout)
		for _, x := range samples {
			vt := prometheus.GaugeValue
			if x.Desc.Type == promtext.Counter {
				vt = prometheus.CounterValue
			}
			m, merr := prometheus.NewConstMetric(descs[x.Desc], vt, x.Value, x.Labels...)
			if merr != nil {
				m = prometheus.NewInvalidMetric(descs[x.Desc], merr)
			}
			ch <- m
		}
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descs[s.first], fmt.Errorf("%s: %w", s.path, err))
		}
	}
}

type result struct {
	samples []promtext.Sample
	err     error
}

// collectOne runs s.stats in a goroutine of its own, so that a fault on
// a file truncated under its mapping is an error (SetPanicOnFault), and
// so that a file whose open waits is given up after timeout.
func collectOne(s source, timeout time.Duration) ([]promtext.Sample, error) {
	done := make(chan result, 1) // the goroutine never blocks on it
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("metrics: reading stats failed: %v", r)}
			}
		}()
		samples, err := s.stats()
		done <- result{samples, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.samples, r.err
	case <-t.C:
		return nil, fmt.Errorf("%w after %v", ErrTimeout, timeout)
	}
}
