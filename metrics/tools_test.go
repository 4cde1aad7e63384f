package metrics

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// buildTool builds a command of the root module from the working tree
// (go.work puts it in this module's build).
func buildTool(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// TestToolsOutputParses: offmap stat --prometheus and offqueue stats
// --prometheus print what expfmt parses, with the collector's names,
// types, labels and values for the same files, after another process
// died holding a lock of the map.
func TestToolsOutputParses(t *testing.T) {
	offmapBin := buildTool(t, "github.com/offmap/offmap/cmd/offmap")
	offqueueBin := buildTool(t, "github.com/offmap/offmap/cmd/offqueue")
	dir := t.TempDir()
	mp, qd := filepath.Join(dir, `a "quoted" map`), filepath.Join(dir, "q")
	m, err := offmap.Open(mp, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, child("map-put", mp, "KEY=a", "N=100"))
	holder := child("map-hold", mp, "KEY=k")
	startUntil(t, holder, "locked")
	kill(holder)
	if err := m.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	m.Close()
	q, err := queue.Open(qd, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runAll(t, child("queue-append", qd, "N=25"))
	if out, err := child("queue-ack", qd, "KEY=billing", "N=10").Output(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	q.Close()

	var text bytes.Buffer
	for _, cmd := range []*exec.Cmd{exec.Command(offmapBin, "stat", "--prometheus", mp), exec.Command(offqueueBin, "stats", "--prometheus", qd)} {
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", cmd.Args, err)
		}
		text.Write(out)
	}
	tools := parse(t, &text)

	c := NewCollector()
	c.Timeout = 10 * time.Second
	c.AddMap(mp)
	c.AddQueue(qd)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(gathered) != len(tools) || len(gathered) != 22 {
		t.Errorf("the tools print %d families, the collector gathers %d; want 22", len(tools), len(gathered))
	}
	for _, g := range gathered {
		f := tools[g.GetName()]
		if f == nil {
			t.Errorf("the tools lack %s", g.GetName())
			continue
		}
		if f.GetType() != g.GetType() || f.GetHelp() != g.GetHelp() || len(f.Metric) != len(g.Metric) {
			t.Errorf("%s: the tools print a %v of %d samples (%q), the collector a %v of %d (%q)",
				g.GetName(), f.GetType(), len(f.Metric), f.GetHelp(), g.GetType(), len(g.Metric), g.GetHelp())
			continue
		}
		for _, gm := range g.Metric {
			var labels []string
			for _, l := range gm.Label {
				labels = append(labels, l.GetName(), l.GetValue())
			}
			v, ok := value(tools, g.GetName(), labels...)
			w := gm.GetGauge().GetValue()
			if g.GetType() == dto.MetricType_COUNTER {
				w = gm.GetCounter().GetValue()
			}
			if !ok || v != w {
				t.Errorf("%s%v: the tools print %v (%v), the collector %v", g.GetName(), labels, v, ok, w)
			}
		}
	}
	want(t, tools, []string{"path", mp}, map[string]float64{
		"offmap_map_entries": 101, "offmap_map_lock_takeovers_total": 1, "offmap_map_repairs_total": 1,
	})
	want(t, tools, []string{"path", qd}, map[string]float64{"offmap_queue_messages": 25})
	want(t, tools, []string{"path", qd, "tailer", "billing"}, map[string]float64{"offmap_queue_tailer_lag_messages": 15})
}
