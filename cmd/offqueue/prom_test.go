package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/offmap/offmap/queue"
)

// TestStatsPrometheus: stats --prometheus prints each queue's metrics in
// the text exposition format, families once each, the tailer's name and
// the directory escaped; a damaged queue prints nothing and exits 2.
func TestStatsPrometheus(t *testing.T) {
	a := newQueue(t, "a\nb\nc\n")
	b := filepath.Join(t.TempDir(), `odd"dir`)
	if _, errOut, code := offqueue(t, "x\n", "append", b); code != 0 {
		t.Fatalf("append: %q", errOut)
	}
	lib, err := queue.Open(a, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := lib.NamedTailer(`bill"ing`)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.Next(); err != nil {
		t.Fatal(err)
	}
	if err := tl.Ack(); err != nil {
		t.Fatal(err)
	}
	lib.NamedTailer("audit")
	lib.Close()
	damage(t, a, "queue.meta", 448, []byte{2})

	qa, err := queue.Open(a, queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := qa.Stats()
	qa.Close()
	if err != nil || len(sa.Tailers) != 2 || len(sa.Cycles) != 1 {
		t.Fatalf("queue.Stats: %+v %v", sa, err)
	}
	lagBytes := map[string]int64{}
	for _, ts := range sa.Tailers {
		lagBytes[ts.Name] = ts.LagBytes
	}
	if !(lagBytes["audit"] > lagBytes[`bill"ing`] && lagBytes[`bill"ing`] > 0) {
		t.Fatalf("lag in bytes %v: audit lags by 3 messages, billing by 2", lagBytes)
	}
	created := float64(sa.Cycles[0].Created.UnixNano()) / 1e9

	out, errOut, code := offqueue(t, "", "stats", "--prometheus", a, b)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d %q", code, errOut)
	}
	eb := strings.ReplaceAll(b, `"`, `\"`)
	for _, want := range []string{
		"# TYPE offmap_queue_messages gauge\n" +
			fmt.Sprintf("offmap_queue_messages{path=%q} 3\n", a) +
			fmt.Sprintf("offmap_queue_messages{path=\"%s\"} 1\n", eb),
		"# TYPE offmap_queue_cycles gauge\n",
		fmt.Sprintf("offmap_queue_cycles{path=%q} 1\n", a),
		"# TYPE offmap_queue_skipped_slots_total counter\n" +
			fmt.Sprintf("offmap_queue_skipped_slots_total{path=%q} 2\n", a) +
			fmt.Sprintf("offmap_queue_skipped_slots_total{path=\"%s\"} 0\n", eb),
		fmt.Sprintf("offmap_queue_tailer_acked_index{path=%q,tailer=\"bill\\\"ing\"} 1\n", a),
		fmt.Sprintf("offmap_queue_tailer_lag_messages{path=%q,tailer=\"bill\\\"ing\"} 2\n", a),
		fmt.Sprintf("offmap_queue_tailer_lag_messages{path=%q,tailer=\"audit\"} 3\n", a),
		fmt.Sprintf("offmap_queue_tailer_lag_bytes{path=%q,tailer=\"bill\\\"ing\"} %d\n", a, lagBytes[`bill"ing`]),
		fmt.Sprintf("offmap_queue_tailer_lag_bytes{path=%q,tailer=\"audit\"} %d\n", a, lagBytes["audit"]),
		fmt.Sprintf("offmap_queue_tailer_unacked_since_timestamp_seconds{path=%q,tailer=\"audit\"} %s\n", a, strconv.FormatFloat(created, 'g', -1, 64)),
		fmt.Sprintf("offmap_queue_writers{path=%q} 0\n", a),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `tailer="audit"} 0`) || strings.Count(out, "offmap_queue_tailer_acked_index{") != 1 {
		t.Errorf("a tailer that acknowledged nothing has an acknowledged index:\n%s", out)
	}
	for _, fam := range []string{"messages", "bytes", "file_bytes", "cycles", "writers", "skipped_slots_total", "tailer_acked_index", "tailer_lag_messages", "tailer_lag_bytes", "tailer_unacked_since_timestamp_seconds"} {
		if n := strings.Count(out, "# TYPE offmap_queue_"+fam+" "); n != 1 {
			t.Errorf("%d TYPE lines of offmap_queue_%s:\n%s", n, fam, out)
		}
	}
	// A cycle file that cannot be read: nothing on stdout, status 2.
	c := copyQueue(t, a)
	if err := os.Truncate(filepath.Join(c, cycleFile(t, c)), 100); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = offqueue(t, "", "stats", "--prometheus", b, c)
	if code != 2 || out != "" || !strings.Contains(errOut, "could not be read") {
		t.Errorf("damaged queue: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
