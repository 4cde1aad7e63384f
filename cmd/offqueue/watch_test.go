package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/queue"
)

// TestStatsWatch runs stats --watch --json and changes the queue between
// its refreshes: each refresh shows the appends and acknowledgements
// since the one before, exactly, and rates for them (none on the first).
func TestStatsWatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	tl, err := q.NamedTailer("billing")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	appendN := func(n int) {
		for range n {
			if _, err := q.Append([]byte("m")); err != nil {
				t.Fatal(err)
			}
		}
	}
	ack := func(n int) {
		for range n {
			if _, _, err := tl.Next(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tl.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	appendN(50)
	ack(10)

	cmd := exec.Command(bin, "stats", "--watch", "--json", "--interval", "400ms", "--count", "4", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var refreshes []watchJSON
	// Between refreshes: 100 appends and 40 acknowledged, then 0 and 25,
	// then nothing.
	steps := [][2]int{{100, 40}, {0, 25}, {0, 0}}
	for sc.Scan() {
		var r watchJSON
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		refreshes = append(refreshes, r)
		if i := len(refreshes) - 1; i < len(steps) {
			appendN(steps[i][0])
			ack(steps[i][1])
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if len(refreshes) != 4 {
		t.Fatalf("%d refreshes, want 4 (--count 4)", len(refreshes))
	}
	first := refreshes[0]
	if first.AppendRate != nil || first.Messages != 50 || len(first.Tailers) != 1 || first.Tailers[0].Rate != nil ||
		first.Tailers[0].Name != "billing" || *first.Tailers[0].Lag != 40 {
		t.Fatalf("first refresh: %+v %+v", first, first.Tailers)
	}
	appended, acked, lag := 50, 10, 40
	for i, r := range refreshes[1:] {
		s := steps[i]
		appended, acked, lag = appended+s[0], acked+s[1], lag+s[0]-s[1]
		tr := r.Tailers[0]
		// The lag in bytes moves with the lag in messages; the age bound is
		// the one cycle file's.
		pb := refreshes[i].Tailers[0].LagBytes
		if tr.LagBytes == nil || pb == nil || *tr.LagBytes <= 0 || (*tr.LagBytes > *pb) != (s[0] > s[1]) || (*tr.LagBytes == *pb) != (s[0] == s[1]) ||
			tr.UnackedAgeMax == nil || *tr.UnackedAgeMax < 0 {
			t.Fatalf("refresh %d: lag %v bytes (before: %v), at most %v s old, after %d appends and %d acknowledged", i+1, tr.LagBytes, pb, tr.UnackedAgeMax, s[0], s[1])
		}
		if r.Messages != uint64(appended) || r.End-refreshes[i].End != uint64(s[0]) || *tr.Lag != int64(lag) ||
			*tr.Acked-*refreshes[i].Tailers[0].Acked != uint64(s[1]) {
			t.Fatalf("refresh %d: %+v, tailer %+v; want %d messages, %d more, lag %d", i+1, r, tr, appended, s[0], lag)
		}
		if r.AppendRate == nil || tr.Rate == nil || (*r.AppendRate > 0) != (s[0] > 0) || (*tr.Rate > 0) != (s[1] > 0) {
			t.Fatalf("refresh %d: rates %v, %v after %d appends and %d acknowledged", i+1, r.AppendRate, tr.Rate, s[0], s[1])
		}
		// The rate is the count over the time between refreshes, about 400 ms.
		if s[0] > 0 && (*r.AppendRate > float64(s[0])/0.2 || *r.AppendRate < float64(s[0])/4) {
			t.Fatalf("refresh %d: append rate %v for %d appends in about 400 ms", i+1, *r.AppendRate, s[0])
		}
	}

	// Text: a line per refresh and a line per tailer, under a header.
	text, errs, code := offqueue(t, "", "stats", "--watch", "--interval", "10ms", "--count", "2", dir)
	if code != 0 || strings.Count(text, "TAILER") != 2 || strings.Count(text, "billing") != 2 || !strings.Contains(text, "append -") || !strings.Contains(text, "append 0.0/s") {
		t.Fatalf("text watch (exit %d): %s%s", code, text, errs)
	}
	// --count without --watch is a usage error.
	if _, errs, code := offqueue(t, "", "stats", "--count", "2", dir); code != 2 || !strings.Contains(errs, "--watch") {
		t.Fatalf("--count without --watch: exit %d, %s", code, errs)
	}
}

// TestBackupCommand: offqueue backup copies a queue that verify passes,
// and refuses an existing destination.
func TestBackupCommand(t *testing.T) {
	dir := newQueue(t, "a\nb\nc\n")
	dest := filepath.Join(t.TempDir(), "copy")
	out, errs, code := offqueue(t, "", "backup", "--json", dir, dest)
	if code != 0 {
		t.Fatalf("backup: exit %d: %s", code, errs)
	}
	var b backupJSON
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.Messages != 3 || len(b.Cycles) != 1 {
		t.Fatalf("backup --json: %q %v", out, err)
	}
	if out, errs, code := offqueue(t, "", "verify", dest); code != 0 {
		t.Fatalf("verify of the copy: exit %d: %s%s", code, out, errs)
	}
	got, _, _ := offqueue(t, "", "dump", dest)
	want, _, _ := offqueue(t, "", "dump", dir)
	if got != want || !strings.Contains(got, "c") {
		t.Fatalf("the copy dumps %q, the source %q", got, want)
	}
	if _, errs, code := offqueue(t, "", "backup", dir, dest); code != 2 || !strings.Contains(errs, "exists") {
		t.Fatalf("backup over an existing copy: exit %d, %s", code, errs)
	}
}
