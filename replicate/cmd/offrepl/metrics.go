package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/offmap/offmap/internal/promtext"
	"github.com/offmap/offmap/replicate/ingest"
	"github.com/offmap/offmap/replicate/mirror"
	"github.com/offmap/offmap/replicate/replica"
)

// reporter is what a job reports to: its progress lines (Line), as text
// or JSON (--log-format), and, once it has built what it runs, the source
// of its metrics (Expose), which --metrics-addr serves and JSON lines
// carry.
type reporter struct {
	job  string
	out  io.Writer
	json bool

	mu      sync.Mutex
	samples func() []promtext.Sample
}

// Line prints one progress line.
func (r *reporter) Line(s string) {
	now := time.Now()
	if !r.json {
		fmt.Fprintf(r.out, "%s %s: %s\n", now.Format(time.TimeOnly), r.job, message(s))
		return
	}
	rec := struct {
		Time    time.Time          `json:"time"`
		Job     string             `json:"job"`
		Message string             `json:"message"`
		Metrics map[string]float64 `json:"metrics,omitempty"` // by metric name, without labels
	}{Time: now, Job: r.job, Message: message(s)}
	if samples := r.current(); len(samples) > 0 {
		rec.Metrics = make(map[string]float64, len(samples))
		for _, x := range samples {
			rec.Metrics[x.Desc.Name] = x.Value
		}
	}
	b, _ := json.Marshal(rec)
	r.out.Write(append(b, '\n'))
}

// Expose sets the function that returns the job's metrics now.
func (r *reporter) Expose(f func() []promtext.Sample) {
	r.mu.Lock()
	r.samples = f
	r.mu.Unlock()
}

func (r *reporter) current() []promtext.Sample {
	r.mu.Lock()
	f := r.samples
	r.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// ServeHTTP writes the job's metrics in the Prometheus text format:
// none before the job has built what it runs.
func (r *reporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	var set promtext.Set
	set.Add(r.current()...)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	set.WriteTo(w)
}

// serveMetrics listens on addr and serves r on /metrics until the
// returned function is called; it returns the address listened on.
func serveMetrics(addr string, r *reporter) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", r)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// The metrics of the jobs. Counters count from this process's start;
// each series is labelled with the local queue or map and, for ingest
// and replica, the engine's source.
var (
	mirrorSent       = &promtext.Desc{Name: "offmap_repl_mirror_sent_messages_total", Help: "Messages the mirror published, resends after a failed session included.", Type: promtext.Counter, Labels: []string{"queue"}}
	mirrorAcked      = &promtext.Desc{Name: "offmap_repl_mirror_acked_messages_total", Help: "Messages the engine acknowledged and the mirror recorded.", Type: promtext.Counter, Labels: []string{"queue"}}
	mirrorDuplicates = &promtext.Desc{Name: "offmap_repl_mirror_duplicates_total", Help: "Publishes the engine recognised as already stored.", Type: promtext.Counter, Labels: []string{"queue"}}
	mirrorRestarts   = &promtext.Desc{Name: "offmap_repl_mirror_restarts_total", Help: "Sessions with the engine that ended in an error and were followed by another (reconnects).", Type: promtext.Counter, Labels: []string{"queue"}}
	mirrorLag        = &promtext.Desc{Name: "offmap_repl_mirror_lag_messages", Help: "Messages in the queue the engine has not acknowledged yet; absent when it cannot be counted.", Type: promtext.Gauge, Labels: []string{"queue"}}
	mirrorFailing    = &promtext.Desc{Name: "offmap_repl_mirror_failing", Help: "1 while the last session with the engine ended in an error and no later one has had messages acknowledged.", Type: promtext.Gauge, Labels: []string{"queue"}}

	ingestAppended = &promtext.Desc{Name: "offmap_repl_ingest_appended_messages_total", Help: "Messages the ingest appended to the local queue.", Type: promtext.Counter, Labels: []string{"queue", "source"}}
	ingestStored   = &promtext.Desc{Name: "offmap_repl_ingest_stored_sequence", Help: "The engine's sequence of the last message in the local queue.", Type: promtext.Gauge, Labels: []string{"queue", "source"}}
	ingestLag      = &promtext.Desc{Name: "offmap_repl_ingest_lag_messages", Help: "Messages the engine holds that the local queue lacks; absent while the engine's last sequence is unknown.", Type: promtext.Gauge, Labels: []string{"queue", "source"}}
	ingestFailing  = &promtext.Desc{Name: "offmap_repl_ingest_failing", Help: "1 while the last attempt to reach the engine or to append failed.", Type: promtext.Gauge, Labels: []string{"queue", "source"}}

	replicaApplied   = &promtext.Desc{Name: "offmap_repl_replica_applied_revision", Help: "The engine revision up to which every change is applied to the map.", Type: promtext.Gauge, Labels: []string{"map", "source"}}
	replicaHead      = &promtext.Desc{Name: "offmap_repl_replica_head_revision", Help: "The engine's last revision the replica knows of.", Type: promtext.Gauge, Labels: []string{"map", "source"}}
	replicaLag       = &promtext.Desc{Name: "offmap_repl_replica_lag_revisions", Help: "Revisions the engine holds that the replica has not applied.", Type: promtext.Gauge, Labels: []string{"map", "source"}}
	replicaKeys      = &promtext.Desc{Name: "offmap_repl_replica_keys", Help: "Replicated keys in the map.", Type: promtext.Gauge, Labels: []string{"map", "source"}}
	replicaConnected = &promtext.Desc{Name: "offmap_repl_replica_connected", Help: "1 while the last request to the engine succeeded.", Type: promtext.Gauge, Labels: []string{"map", "source"}}
	replicaChanges   = &promtext.Desc{Name: "offmap_repl_replica_applied_changes_total", Help: "Changes the replica applied.", Type: promtext.Counter, Labels: []string{"map", "source"}}
	replicaResyncs   = &promtext.Desc{Name: "offmap_repl_replica_resyncs_total", Help: "Full resyncs the replica completed.", Type: promtext.Counter, Labels: []string{"map", "source"}}
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func mirrorSamples(dir string, p mirror.Progress) []promtext.Sample {
	l := []string{dir}
	s := []promtext.Sample{
		{Desc: mirrorSent, Labels: l, Value: float64(p.Sent)},
		{Desc: mirrorAcked, Labels: l, Value: float64(p.Acked)},
		{Desc: mirrorDuplicates, Labels: l, Value: float64(p.Duplicates)},
		{Desc: mirrorRestarts, Labels: l, Value: float64(p.Restarts)},
		{Desc: mirrorFailing, Labels: l, Value: b2f(p.Err != nil)},
	}
	if p.Lag >= 0 {
		s = append(s, promtext.Sample{Desc: mirrorLag, Labels: l, Value: float64(p.Lag)})
	}
	return s
}

func ingestSamples(dir string, p ingest.Progress) []promtext.Sample {
	l := []string{dir, p.Source}
	s := []promtext.Sample{
		{Desc: ingestAppended, Labels: l, Value: float64(p.Appended)},
		{Desc: ingestStored, Labels: l, Value: float64(p.Stored)},
		{Desc: ingestFailing, Labels: l, Value: b2f(p.Err != nil)},
	}
	if p.Lag >= 0 {
		s = append(s, promtext.Sample{Desc: ingestLag, Labels: l, Value: float64(p.Lag)})
	}
	return s
}

func replicaSamples(path string, p replica.Progress) []promtext.Sample {
	l := []string{path, p.Engine + ":" + p.Source}
	return []promtext.Sample{
		{Desc: replicaApplied, Labels: l, Value: float64(p.Applied)},
		{Desc: replicaHead, Labels: l, Value: float64(p.Head)},
		{Desc: replicaLag, Labels: l, Value: float64(p.Lag)},
		{Desc: replicaKeys, Labels: l, Value: float64(p.Keys)},
		{Desc: replicaConnected, Labels: l, Value: b2f(p.Connected)},
		{Desc: replicaChanges, Labels: l, Value: float64(p.Applies)},
		{Desc: replicaResyncs, Labels: l, Value: float64(p.Resyncs)},
	}
}
