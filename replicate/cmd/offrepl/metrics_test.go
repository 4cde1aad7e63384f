package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/promtext"
	"github.com/offmap/offmap/replicate/ingest"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/replica"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMirrorMetrics runs offrepl mirror with --metrics-addr and
// --log-format json against an embedded JetStream server: its JSON
// progress lines carry the counts, and a scrape of /metrics, parsed by
// Prometheus's parser, reports every message of the queue sent and
// acknowledged, no lag and no failure.
func TestMirrorMetrics(t *testing.T) {
	const n = 300
	c, _, _ := enginetest.NATSForTest(t, 1)
	dir := mirrorQueue(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"mirror", "--queue", dir, "--source", "a", "--progress", "50ms", "--log-format", "json",
			"--metrics-addr", "127.0.0.1:0", "--nats", c.URLs(), "--stream", "S", "--subject", "s", "--replicas", "1"}, pw, io.Discard)
		pw.Close()
	}()
	type line struct {
		Time    time.Time          `json:"time"`
		Job     string             `json:"job"`
		Message string             `json:"message"`
		Metrics map[string]float64 `json:"metrics"`
	}
	sc := bufio.NewScanner(pr)
	var url string
	deadline := time.AfterFunc(60*time.Second, func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	defer deadline.Stop()
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Job != "mirror" || l.Time.IsZero() {
			t.Fatalf("not a JSON progress line: %q (%v)", sc.Text(), err)
		}
		if u, ok := strings.CutPrefix(l.Message, "metrics on "); ok {
			url = u
		}
		if l.Metrics["offmap_repl_mirror_acked_messages_total"] == n && l.Metrics["offmap_repl_mirror_lag_messages"] == 0 {
			break
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("progress lines ended before every message was acknowledged: %v", err)
	}
	if url == "" {
		t.Fatal("no line said where the metrics are")
	}
	go io.Copy(io.Discard, pr) // the lines that follow

	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	for name, want := range map[string]float64{
		"offmap_repl_mirror_acked_messages_total": n,
		"offmap_repl_mirror_lag_messages":         0,
		"offmap_repl_mirror_failing":              0,
		"offmap_repl_mirror_restarts_total":       0,
	} {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 {
			t.Errorf("%s: %v", name, f)
			continue
		}
		m := f.Metric[0]
		got := m.GetGauge().GetValue()
		if f.GetType() == dto.MetricType_COUNTER {
			got = m.GetCounter().GetValue()
		}
		if got != want || len(m.Label) != 1 || m.Label[0].GetName() != "queue" || m.Label[0].GetValue() != dir {
			t.Errorf("%s%v = %v, want %v", name, m.Label, got, want)
		}
	}
	if f := fams["offmap_repl_mirror_sent_messages_total"]; f == nil || f.Metric[0].GetCounter().GetValue() < n {
		t.Errorf("sent: %v, want at least %d", f, n)
	}
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d after cancel", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("offrepl did not stop")
	}
}

// TestLogFormatUsage: an unknown --log-format is a usage error.
func TestLogFormatUsage(t *testing.T) {
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"mirror", "--queue", t.TempDir(), "--source", "a", "--log-format", "xml"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), `--log-format "xml": text or json`) {
		t.Fatalf("exit %d, %q", code, errOut.String())
	}
}

// TestJobSamples: the ingest's and the replica's metrics, from their
// Progress, in the text format Prometheus's parser reads; a lag that is
// not known is absent, not 0 or -1.
func TestJobSamples(t *testing.T) {
	var set promtext.Set
	set.Add(ingestSamples("/q", ingest.Progress{Source: "jetstream:S", Stored: 41, Lag: -1, Appended: 40, Err: errors.New("down")})...)
	set.Add(replicaSamples("/m.map", replica.Progress{Engine: "kafka", Source: "prices", Applied: 7, Head: 9, Lag: 2, Keys: 5, Connected: true, Applies: 12, Resyncs: 1})...)
	var b strings.Builder
	set.WriteTo(&b)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("expfmt: %v\n%s", err, b.String())
	}
	if _, ok := fams["offmap_repl_ingest_lag_messages"]; ok {
		t.Errorf("an unknown lag is reported:\n%s", b.String())
	}
	for name, want := range map[string]float64{
		"offmap_repl_ingest_appended_messages_total": 40, "offmap_repl_ingest_stored_sequence": 41, "offmap_repl_ingest_failing": 1,
		"offmap_repl_replica_applied_revision": 7, "offmap_repl_replica_head_revision": 9, "offmap_repl_replica_lag_revisions": 2,
		"offmap_repl_replica_keys": 5, "offmap_repl_replica_connected": 1, "offmap_repl_replica_applied_changes_total": 12,
		"offmap_repl_replica_resyncs_total": 1,
	} {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 {
			t.Errorf("%s: %v", name, f)
			continue
		}
		got := f.Metric[0].GetGauge().GetValue()
		if f.GetType() == dto.MetricType_COUNTER {
			got = f.Metric[0].GetCounter().GetValue()
		}
		if got != want || len(f.Metric[0].Label) != 2 {
			t.Errorf("%s%v = %v, want %v", name, f.Metric[0].Label, got, want)
		}
	}
}
