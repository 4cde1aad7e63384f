package metrics

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The tests' helper processes re-run the test binary with METRICS_CHILD
// naming their role; FILE, N and KEY say what they work on.
var children = map[string]func() error{
	"map-put": func() error { // N keys KEY-0 .. KEY-(N-1)
		m, err := offmap.Open(os.Getenv("FILE"), offmap.Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		for i := range n {
			if err := m.Put(fmt.Appendf(nil, "%s-%d", os.Getenv("KEY"), i), []byte("value")); err != nil {
				return err
			}
		}
		return nil
	},
	"map-hold": func() error { // hold KEY's segment lock until killed
		m, err := offmap.Open(os.Getenv("FILE"), offmap.Options{})
		if err != nil {
			return err
		}
		return m.Update([]byte(os.Getenv("KEY")), func(v []byte, found bool) ([]byte, offmap.Op) {
			fmt.Println("locked")
			select {}
		})
	},
	"queue-append": func() error { // N messages
		q, err := queue.Open(os.Getenv("FILE"), queue.Options{})
		if err != nil {
			return err
		}
		defer q.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		for i := range n {
			if _, err := q.Append(fmt.Appendf(nil, "m%d", i)); err != nil {
				return err
			}
		}
		return nil
	},
	"queue-reserve": func() error { // reserve a slot, never commit it
		q, err := queue.Open(os.Getenv("FILE"), queue.Options{})
		if err != nil {
			return err
		}
		if _, err := q.Reserve(8); err != nil {
			return err
		}
		fmt.Println("reserved")
		select {}
	},
	"queue-ack": func() error { // named tailer KEY reads N messages, acks, prints its index
		q, err := queue.Open(os.Getenv("FILE"), queue.Options{SkipAfter: time.Millisecond})
		if err != nil {
			return err
		}
		defer q.Close()
		tl, err := q.NamedTailer(os.Getenv("KEY"))
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(os.Getenv("N"))
		for range n {
			if err := tl.Wait(context.Background(), queue.Block); err != nil {
				return err
			}
			if _, _, err := tl.Next(); err != nil {
				return err
			}
		}
		if err := tl.Ack(); err != nil {
			return err
		}
		fmt.Println(tl.Index())
		return nil
	},
}

func TestMain(m *testing.M) {
	if role := os.Getenv("METRICS_CHILD"); role != "" {
		if err := children[role](); err != nil {
			fmt.Fprintln(os.Stderr, role+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(role, file string, env ...string) *exec.Cmd {
	cmd := reexec.Command("-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"METRICS_CHILD=" + role, "FILE=" + file}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// runAll runs the commands at once and fails the test if one fails.
func runAll(t *testing.T, cmds ...*exec.Cmd) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		wg.Go(func() { errs[i] = c.Run() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// startUntil starts cmd and waits for the line it prints once it holds
// what the test needs; the test kills it.
func startUntil(t *testing.T, cmd *exec.Cmd, line string) {
	t.Helper()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	got, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(got) != line {
		t.Fatalf("%v said %q, want %q", cmd.Args, got, line)
	}
}

func kill(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// serve registers c and serves it on 127.0.0.1; it returns the URL.
func serve(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/metrics"
}

// scrape gets url within timeout and parses it with Prometheus's parser.
func scrape(t *testing.T, url string, timeout time.Duration) map[string]*dto.MetricFamily {
	t.Helper()
	cl := http.Client{Timeout: timeout}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s\n%s", resp.Status, b)
	}
	return parse(t, resp.Body)
}

func parse(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	return fams
}

// value is the sample of family name whose labels are labels (name,
// value pairs); ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		for i, l := range m.Label {
			if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.Counter.GetValue(), true
		case dto.MetricType_GAUGE:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// want checks that every metric of wants has its value, and its type.
func want(t *testing.T, fams map[string]*dto.MetricFamily, labels []string, wants map[string]float64) {
	t.Helper()
	for name, w := range wants {
		got, ok := value(fams, name, labels...)
		if !ok || got != w {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, w)
		}
		typ := dto.MetricType_GAUGE
		if strings.HasSuffix(name, "_total") {
			typ = dto.MetricType_COUNTER
		}
		if f := fams[name]; f != nil && f.GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, f.GetType(), typ)
		}
	}
}

// TestScrapeActivity: a scrape over HTTP, parsed by expfmt, reports what
// several processes did to a map and a queue: entries they put, a lock
// taken over from a process killed holding it, a slot its killed writer
// left, a named tailer's acknowledged index and lag. A scrape while a
// process holds a segment lock does not wait for it.
func TestScrapeActivity(t *testing.T) {
	dir := t.TempDir()
	mp, qd := filepath.Join(dir, "a.map"), filepath.Join(dir, "q")
	m, err := offmap.Open(mp, offmap.Options{LockTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	q, err := queue.Open(qd, queue.Options{SkipAfter: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	c := NewCollector()
	if err := c.AddMap(mp); err != nil {
		t.Fatal(err)
	}
	if err := c.AddQueue(qd); err != nil {
		t.Fatal(err)
	}
	if err := c.AddMap(mp); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a second AddMap of one path: %v", err)
	}
	url := serve(t, c)

	runAll(t, child("map-put", mp, "KEY=a", "N=300"), child("map-put", mp, "KEY=b", "N=200"),
		child("queue-append", qd, "N=40"), child("queue-append", qd, "N=60"))
	// A process holds a segment lock: the scrape does not wait for it.
	holder := child("map-hold", mp, "KEY=k")
	startUntil(t, holder, "locked")
	start := time.Now()
	fams := scrape(t, url, 5*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a scrape while a lock was held took %v", d)
	}
	mapLabels := []string{"path", mp}
	want(t, fams, mapLabels, map[string]float64{
		"offmap_map_entries": 500, "offmap_map_lock_takeovers_total": 0, "offmap_map_repairs_total": 0,
	})
	// It dies holding it; this process takes it over and repairs.
	kill(holder)
	if err := m.Put([]byte("k"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	// A writer dies with a slot reserved; a message follows it; a named
	// tailer in another process reads past the dead slot and acks.
	reserver := child("queue-reserve", qd)
	startUntil(t, reserver, "reserved")
	kill(reserver)
	if _, err := q.Append([]byte("last")); err != nil {
		t.Fatal(err)
	}
	acker := child("queue-ack", qd, "KEY=billing", "N=70")
	out, err := acker.Output()
	if err != nil {
		t.Fatal(err)
	}
	acked, _ := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	// The tailer read 70 messages; the dead slot is not among them unless
	// it came before the 70th.
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for msg := []byte(nil); string(msg) != "last"; { // past the dead slot, which it skips
		if err := tl.Wait(ctx, queue.Block); err != nil {
			t.Fatal(err)
		}
		if _, msg, err = tl.Next(); err != nil {
			t.Fatal(err)
		}
	}
	lag, err := q.Count(acked, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}

	fams = scrape(t, url, 5*time.Second)
	st := m.Stats()
	want(t, fams, mapLabels, map[string]float64{
		"offmap_map_entries":               501,
		"offmap_map_lock_takeovers_total":  1,
		"offmap_map_repairs_total":         1,
		"offmap_map_expired_entries_total": 0,
		"offmap_map_used_bytes":            float64(st.BytesUsed),
		"offmap_map_file_bytes":            float64(st.FileSize),
		"offmap_map_max_file_bytes":        float64(st.MaxFileSize),
		"offmap_map_growth_steps_total":    float64(st.TablesGrown + st.ExtentsAdded),
	})
	qs, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var qbytes float64
	for _, c := range qs.Cycles {
		qbytes += float64(c.BytesUsed)
	}
	qLabels := []string{"path", qd}
	want(t, fams, qLabels, map[string]float64{
		"offmap_queue_messages":            102, // 100, the dead slot, the last
		"offmap_queue_skipped_slots_total": 1,
		"offmap_queue_cycles":              float64(len(qs.Cycles)),
		"offmap_queue_bytes":               qbytes,
		"offmap_queue_writers":             1, // this process's lease
	})
	want(t, fams, []string{"path", qd, "tailer", "billing"}, map[string]float64{
		"offmap_queue_tailer_acked_index":  float64(acked),
		"offmap_queue_tailer_lag_messages": float64(lag),
	})
	if lag != 102-70 && lag != 102-71 {
		t.Errorf("lag %d after 70 messages read of 102", lag)
	}
}

// TestDamagedFileIsCollectionError: a map or queue that cannot be read
// fails its own collection with an error naming it; the other files are
// still reported, and nothing panics.
func TestDamagedFileIsCollectionError(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.map")
	m, err := offmap.Open(good, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.Put([]byte("x"), []byte("y"))
	m.Close()
	bad := filepath.Join(dir, "bad.map")
	if err := os.WriteFile(bad, []byte("OFFMAP\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	qd := filepath.Join(dir, "q")
	q, err := queue.Open(qd, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q.Append([]byte("m"))
	q.Close()
	cycles, _ := filepath.Glob(filepath.Join(qd, "*.oq"))
	if len(cycles) != 1 {
		t.Fatalf("cycle files %q", cycles)
	}
	if err := os.Truncate(cycles[0], 100); err != nil {
		t.Fatal(err)
	}
	c := NewCollector()
	for _, p := range []string{good, bad, filepath.Join(dir, "missing.map")} {
		c.AddMap(p)
	}
	c.AddQueue(qd)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	var me prometheus.MultiError
	if !errors.As(err, &me) || len(me) != 3 {
		t.Fatalf("Gather: %v, want 3 errors", err)
	}
	for _, w := range []string{bad, "missing.map", qd} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Gather's error does not name %s: %v", w, err)
		}
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	want(t, byName, []string{"path", good}, map[string]float64{"offmap_map_entries": 1})
	if _, ok := value(byName, "offmap_queue_messages", "path", qd); ok {
		t.Error("a queue whose cycle cannot be read reports its messages")
	}
	want(t, byName, []string{"path", qd}, map[string]float64{"offmap_queue_cycles": 1})
}
