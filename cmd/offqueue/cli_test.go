package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/queue"
)

// newQueue appends lines (each a message) to a new queue and returns its
// directory.
func newQueue(t *testing.T, lines string) string {
	t.Helper()
	q := filepath.Join(t.TempDir(), "q")
	if _, errOut, code := offqueue(t, lines, "append", q); code != 0 {
		t.Fatalf("append: exit %d %q", code, errOut)
	}
	return q
}

// copyQueue copies the queue directory src to a new one.
func copyQueue(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// damage rewrites part of the file name in dir.
func damage(t *testing.T, dir, name string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// cycleFile is the name of the queue's only cycle file.
func cycleFile(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.oq"))
	if len(files) != 1 {
		t.Fatalf("cycle files: %v", files)
	}
	return filepath.Base(files[0])
}

// TestExitCodes runs the error paths as a user meets them: 0 success; 1
// problems found by verify; 2 for wrong arguments, a missing directory, one
// that is not a queue, a damaged queue read by any command but verify, and
// an index not in the queue. Every failure is one line on stderr.
func TestExitCodes(t *testing.T) {
	good := newQueue(t, "a\nb\nc\n")
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "missing")
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	notQueue := filepath.Join(tmp, "notqueue")
	os.MkdirAll(notQueue, 0o755)
	os.WriteFile(filepath.Join(notQueue, "data.txt"), []byte("x"), 0o644)

	foreignMeta := copyQueue(t, good)
	os.WriteFile(filepath.Join(foreignMeta, "queue.meta"), []byte("<html>not a queue</html>\n"), 0o644)
	truncatedMeta := copyQueue(t, good)
	os.Truncate(filepath.Join(truncatedMeta, "queue.meta"), 100)
	corruptMeta := copyQueue(t, good)
	damage(t, corruptMeta, "queue.meta", 20, []byte{0xde, 0xad, 0xbe, 0xef}) // inside the checksummed header
	foreignCycle := copyQueue(t, good)
	damage(t, foreignCycle, cycleFile(t, foreignCycle), 0, []byte("<html>"))
	badHint := copyQueue(t, good)
	// A write hint (offset 128) far past the end of the file.
	damage(t, badHint, cycleFile(t, badHint), 128, []byte{0, 0, 0, 1, 9, 0, 0, 0})

	for _, c := range []struct {
		args []string
		code int
		msg  string // in the one line on stderr; "" for none
	}{
		// Success.
		{[]string{"dump", good}, 0, ""},
		{[]string{"stats", good}, 0, ""},
		{[]string{"verify", good}, 0, ""},
		{[]string{"help"}, 0, ""},
		{[]string{"dump", "--help"}, 0, ""},
		// Usage errors.
		{nil, 2, "offqueue: no command given (see 'offqueue help')"},
		{[]string{"frobnicate", good}, 2, `offqueue: unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, 2, `offqueue: unknown command "frobnicate"`},
		{[]string{"dump"}, 2, "offqueue: dump: wrong number of arguments; usage: offqueue dump "},
		{[]string{"verify", good, good}, 2, "offqueue: verify: wrong number of arguments"},
		{[]string{"stats", "--bogus", good}, 2, "offqueue: stats: unknown flag --bogus (see 'offqueue stats --help')"},
		{[]string{"dump", "--from", "yesterday", good}, 2, `offqueue: dump: --from "yesterday" is not start, end or an index CYCLE:SEQ`},
		{[]string{"dump", "-n", "-3", good}, 2, `offqueue: dump: invalid value "-3" for -n: negative (see 'offqueue dump --help')`},
		{[]string{"dump", "-n"}, 2, "offqueue: dump: flag -n needs a value"},
		// Missing, not a directory, not a queue: never created.
		{[]string{"dump", missing}, 2, missing + ": no such directory"},
		{[]string{"stats", missing}, 2, missing + ": no such directory"},
		{[]string{"verify", missing}, 2, missing + ": no such directory"},
		{[]string{"follow", missing}, 2, missing + ": no such directory"},
		{[]string{"dump", file}, 2, file + " is a file, not a queue directory"},
		{[]string{"verify", notQueue}, 2, "open " + notQueue + ": directory is not a queue: no queue.meta"},
		{[]string{"append", notQueue}, 2, "directory is not a queue: it holds data.txt but no queue.meta"},
		// A damaged queue: an open or read error, but problems for verify.
		{[]string{"dump", foreignMeta}, 2, "queue.meta: not a file of this kind: wrong magic number"},
		{[]string{"stats", foreignMeta}, 2, "queue.meta: not a file of this kind"},
		{[]string{"verify", foreignMeta}, 1, "offqueue: verify: open " + foreignMeta + ": queue.meta: not a file of this kind"},
		{[]string{"dump", truncatedMeta}, 2, "queue.meta: file is truncated"},
		{[]string{"verify", truncatedMeta}, 1, "queue.meta: file is truncated"},
		{[]string{"dump", corruptMeta}, 2, "queue.meta"},
		{[]string{"verify", corruptMeta}, 1, "queue.meta"},
		{[]string{"dump", foreignCycle}, 2, "not a file of this kind: wrong magic number"},
		{[]string{"verify", foreignCycle}, 1, ""}, // the problem is on stdout
		{[]string{"verify", badHint}, 1, ""},
		// An index not in the queue.
		{[]string{"dump", "--from", "7:0", good}, 2, "offqueue: dump: --from 7:0: index not in the queue"},
	} {
		out, errOut, code := offqueue(t, "", c.args...)
		if code != c.code {
			t.Errorf("offqueue %q: exit %d, want %d\nstdout %q\nstderr %q", c.args, code, c.code, out, errOut)
			continue
		}
		if c.msg == "" {
			if errOut != "" {
				t.Errorf("offqueue %q: stderr %q", c.args, errOut)
			}
			continue
		}
		if !strings.HasPrefix(errOut, "offqueue: ") || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.msg) {
			t.Errorf("offqueue %q: stderr %q, want one line with %q", c.args, errOut, c.msg)
		}
		if out != "" && c.code == 2 {
			t.Errorf("offqueue %q printed %q", c.args, out)
		}
	}
	for _, dir := range []string{missing, file} {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			t.Errorf("a command created %s", dir)
		}
	}
	out, _, _ := offqueue(t, "", "verify", foreignCycle)
	if !strings.Contains(out, "not a file of this kind") || !strings.HasSuffix(out, "\n1 problems\n") {
		t.Errorf("verify of a foreign cycle file: %q", out)
	}
}

// TestDumpJSON: dump --json prints one JSON object per message, the
// payload as text when it is UTF-8 and in hex otherwise or with --hex.
func TestDumpJSON(t *testing.T) {
	q := newQueue(t, "hello\n\xff\x00\nsay \"hi\"\t<b>\n\n")
	type msg struct {
		Index      string  `json:"index"`
		Cycle      uint32  `json:"cycle"`
		Seq        uint32  `json:"seq"`
		Length     int     `json:"length"`
		Payload    *string `json:"payload"`
		PayloadHex *string `json:"payload_hex"`
	}
	decode := func(args ...string) []msg {
		t.Helper()
		out, errOut, code := offqueue(t, "", args...)
		if code != 0 || errOut != "" {
			t.Fatalf("offqueue %q: exit %d %q", args, code, errOut)
		}
		var msgs []msg
		for _, line := range strings.SplitAfter(out, "\n") {
			if line == "" {
				continue
			}
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			var m msg
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if dec.More() || !strings.HasSuffix(line, "}\n") {
				t.Fatalf("line %q is not one JSON object", line)
			}
			msgs = append(msgs, m)
		}
		return msgs
	}
	text := func(s string) *string { return &s }
	want := []msg{
		{"0:0", 0, 0, 5, text("hello"), nil},
		{"0:1", 0, 1, 2, nil, text("ff00")},
		{"0:2", 0, 2, 12, text("say \"hi\"\t<b>"), nil},
		{"0:3", 0, 3, 0, text(""), nil},
	}
	check := func(got, want []msg) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%d messages, want %d: %+v", len(got), len(want), got)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Index != w.Index || g.Cycle != w.Cycle || g.Seq != w.Seq || g.Length != w.Length ||
				(g.Payload == nil) != (w.Payload == nil) || (g.PayloadHex == nil) != (w.PayloadHex == nil) ||
				(g.Payload != nil && *g.Payload != *w.Payload) || (g.PayloadHex != nil && *g.PayloadHex != *w.PayloadHex) {
				t.Errorf("message %d: %+v, want %+v", i, g, w)
			}
		}
	}
	check(decode("dump", "--json", q), want)
	check(decode("dump", q, "--json", "--from", "0:1", "-n", "1"), want[1:2])
	check(decode("dump", "--json", "--hex", q), []msg{
		{"0:0", 0, 0, 5, nil, text("68656c6c6f")},
		{"0:1", 0, 1, 2, nil, text("ff00")},
		{"0:2", 0, 2, 12, nil, text("7361792022686922093c623e")},
		{"0:3", 0, 3, 0, nil, text("")},
	})
	if got := decode("dump", "--json", "--from", "end", q); len(got) != 0 {
		t.Errorf("dump --from end: %+v", got)
	}
}

// TestStatsJSON: stats --json prints one object with the settings, the
// cycle files, the message count and the named tailers.
func TestStatsJSON(t *testing.T) {
	q := newQueue(t, "a\nb\nc\n")
	lib, err := queue.Open(q, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := lib.NamedTailer("billing")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.Next(); err != nil {
		t.Fatal(err)
	}
	if err := tl.Ack(); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.NamedTailer("audit"); err != nil {
		t.Fatal(err)
	}
	lib.Close()

	out, errOut, code := offqueue(t, "", "stats", "--json", q)
	if code != 0 || errOut != "" {
		t.Fatalf("stats --json: exit %d %q", code, errOut)
	}
	var st struct {
		Dir           string    `json:"dir"`
		FormatVersion int       `json:"format_version"`
		Roll          string    `json:"roll"`
		IndexSpacing  int       `json:"index_spacing"`
		MaxCycleSize  int64     `json:"max_cycle_size"`
		Created       time.Time `json:"created"`
		Checksums     bool      `json:"checksum_messages"`
		Wakeups       string    `json:"wakeups"`
		Writers       []int     `json:"writers"`
		Watchers      int       `json:"watchers"`
		Cycles        []struct {
			Cycle     uint32    `json:"cycle"`
			File      string    `json:"file"`
			Created   time.Time `json:"created"`
			FileSize  int64     `json:"file_size"`
			Messages  uint32    `json:"messages"`
			BytesUsed int64     `json:"bytes_used"`
			State     string    `json:"state"`
			Error     string    `json:"error"`
		} `json:"cycles"`
		Messages     uint64       `json:"messages"`
		SkippedSlots uint64       `json:"skipped_slots"`
		Tailers      []jsonTailer `json:"tailers"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("more than one object:\n%s", out)
	}
	if st.Dir != q || st.FormatVersion != 2 || st.Roll != "daily" || st.IndexSpacing != 64 || st.MaxCycleSize != 4<<30 ||
		st.Messages != 3 || len(st.Writers) != 0 || st.Watchers != 0 || st.SkippedSlots != 0 ||
		st.Wakeups != "futex_waitv" && !strings.HasPrefix(st.Wakeups, "polled each") {
		t.Errorf("stats --json: %+v", st)
	}
	if age := time.Since(st.Created); age < 0 || age > time.Minute {
		t.Errorf("created %v, %v ago", st.Created, age)
	}
	if !strings.Contains(out, `"created": "`+st.Created.Format("2006-01-02T15:04:05")) || !strings.Contains(out, `Z",`) {
		t.Errorf("created is not RFC 3339 in UTC:\n%s", out)
	}
	if len(st.Cycles) != 1 {
		t.Fatalf("cycles: %+v", st.Cycles)
	}
	c := st.Cycles[0]
	if c.Cycle != 0 || c.File != cycleFile(t, q) || c.Messages != 3 || c.State != "open" || c.Error != "" || c.BytesUsed <= 0 || c.FileSize < c.BytesUsed ||
		c.Created.Before(st.Created) || c.Created.After(time.Now()) {
		t.Errorf("cycle: %+v", c)
	}
	if len(st.Tailers) != 2 {
		t.Fatalf("tailers: %+v", st.Tailers)
	}
	for _, tl := range st.Tailers {
		switch {
		case tl.Name == "billing" && tl.AckedUpTo != nil && *tl.AckedUpTo == "0:1" &&
			*tl.AckedCycle == 0 && *tl.AckedSeq == 1 && *tl.AckedIndex == 1 && tl.Lag != nil && *tl.Lag == 2:
		case tl.Name == "audit" && tl.AckedUpTo == nil && tl.AckedCycle == nil && tl.AckedSeq == nil && tl.AckedIndex == nil &&
			tl.Lag != nil && *tl.Lag == 3:
		default:
			t.Errorf("tailer %q acknowledged up to %v (%v:%v, %v), lag %v", tl.Name, tl.AckedUpTo, tl.AckedCycle, tl.AckedSeq, tl.AckedIndex, tl.Lag)
		}
		// Both lag behind in the one cycle, made when the queue was.
		if tl.LagBytes == nil || *tl.LagBytes <= 0 || *tl.LagBytes > c.BytesUsed || tl.Since == nil || !tl.Since.Equal(c.Created) || tl.AgeMax == nil || *tl.AgeMax < 0 {
			t.Errorf("tailer %q: lag %v bytes, unacknowledged since %v, at most %v s", tl.Name, tl.LagBytes, tl.Since, tl.AgeMax)
		}
	}
	// The text form says the same, with sizes in binary units.
	text, _, _ := offqueue(t, "", "stats", q)
	for _, want := range []string{
		"created    " + st.Created.Format(time.RFC3339) + "\n",
		"max cycle  4.0 GiB\n",
		"writers    none\n",
		fmt.Sprintf(" 3 messages %11s used %11s file  open\n", cliargs.FormatSize(c.BytesUsed), cliargs.FormatSize(c.FileSize)),
		"tailer     billing: acknowledged up to 0:1, lag 2 messages (",
		"tailer     audit: nothing acknowledged, lag 3 messages (",
		"messages   3\n",
		"skipped    0 slots of dead writers\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("stats lacks %q:\n%s", want, text)
		}
	}
}

// TestStatsLag: stats shows each named tailer's lag, exact across cycle
// files and a cycle deleted by retention, in the text and in JSON, with
// the acknowledged index as numbers beside CYCLE:SEQ.
func TestStatsLag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	// Four batches of 10, 20, 30 and 40 messages, each in a later cycle
	// file than the last (a batch may span two): each by a new open,
	// whose first append goes to the cycle of the clock (an open queue
	// rolls when its timer fires, late on a loaded machine).
	var all []uint64
	for _, n := range []int{10, 20, 30, 40} {
		q, err := queue.Open(dir, queue.Options{Roll: queue.Fast})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			x, err := q.Append([]byte(strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, x)
		}
		q.Close()
		time.Sleep(120 * time.Millisecond)
	}
	lib, err := queue.Open(dir, queue.Options{Roll: queue.Fast})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	cs, err := lib.Cycles()
	if err != nil || len(cs) < 4 {
		t.Fatalf("cycles %v %v", cs, err)
	}
	// "late" acknowledges up to the 4th message, then retention deletes
	// the first cycle file, forced past it.
	ack := func(name string, upTo uint64) {
		tl, err := lib.NamedTailer(name)
		if err != nil {
			t.Fatal(err)
		}
		defer tl.Close()
		if err := tl.Seek(upTo); err != nil {
			t.Fatal(err)
		}
		if err := tl.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	ack("late", all[3])
	// Cycles before the first message's are empty files that an open made
	// when the clock rolled on before its first append (a loaded machine):
	// they go too.
	first, _ := queue.SplitIndex(all[0])
	i0 := slices.Index(cs, first)
	if i0 < 0 {
		t.Fatalf("cycles %v lack the first message's, %d", cs, first)
	}
	if del, err := lib.DeleteCycles(len(cs)-1-i0, true); err != nil || !slices.Equal(del, cs[:i0+1]) {
		t.Fatalf("DeleteCycles: %v %v, want %v", del, err, cs[:i0+1])
	}
	var kept []uint64
	for _, x := range all {
		if c, _ := queue.SplitIndex(x); c != first {
			kept = append(kept, x)
		}
	}
	// "ops" acknowledges up to the 6th message kept, "new" nothing, and
	// "reader" reads one message without acknowledging it.
	ack("ops", kept[5])
	if _, err := lib.NamedTailer("new"); err != nil {
		t.Fatal(err)
	}
	tl, err := lib.NamedTailer("reader")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.Next(); err != nil {
		t.Fatal(err)
	}
	tl.Close()

	after := func(idx uint64) int64 { // the model: messages kept at or after idx
		n := int64(0)
		for _, x := range kept {
			if x >= idx {
				n++
			}
		}
		return n
	}
	type tailer struct {
		acked *uint64
		lag   int64
	}
	want := map[string]tailer{
		"late":   {&all[3], int64(len(kept))}, // the deleted cycle counts nothing
		"ops":    {&kept[5], int64(len(kept)) - 5},
		"new":    {nil, int64(len(kept))},
		"reader": {nil, int64(len(kept))},
	}
	if after(kept[5]) != int64(len(kept))-5 || after(all[3]) != int64(len(kept)) || len(kept) == len(all) || len(kept) < 60 {
		t.Fatalf("the model: %d of %d messages kept", len(kept), len(all))
	}
	// The bytes and the bound on the age come from queue.Stats, which
	// the queue's tests check against the files: here, that stats shows
	// them.
	lst, err := lib.Stats()
	if err != nil {
		t.Fatal(err)
	}
	libTailer := map[string]queue.TailerStats{}
	for _, ts := range lst.Tailers {
		libTailer[ts.Name] = ts
		if ts.LagBytes <= 0 || ts.UnackedSince.IsZero() {
			t.Fatalf("queue.Stats: %+v", ts)
		}
	}
	before := time.Now()
	text, errOut, code := offqueue(t, "", "stats", dir)
	if code != 0 {
		t.Fatalf("stats: exit %d %q", code, errOut)
	}
	for name, w := range want {
		pos := "nothing acknowledged"
		if w.acked != nil {
			c, s := queue.SplitIndex(*w.acked)
			pos = fmt.Sprintf("acknowledged up to %d:%d", c, s)
		}
		line := fmt.Sprintf("tailer     %s: %s, lag %d messages (%s), the oldest unacknowledged at most ", name, pos, w.lag, cliargs.FormatSize(libTailer[name].LagBytes))
		if !strings.Contains(text, line) {
			t.Errorf("stats lacks %q:\n%s", line, text)
		}
	}
	if line := fmt.Sprintf("messages   %d\n", len(kept)); !strings.Contains(text, line) {
		t.Errorf("stats lacks %q:\n%s", line, text)
	}

	out, _, _ := offqueue(t, "", "stats", "--json", dir)
	var st struct {
		Tailers []jsonTailer `json:"tailers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(st.Tailers) != len(want) {
		t.Fatalf("tailers: %s", out)
	}
	for _, tj := range st.Tailers {
		w, ok := want[tj.Name]
		if !ok || tj.Lag == nil || *tj.Lag != w.lag {
			t.Errorf("%s: lag %v, want %d", tj.Name, tj.Lag, w.lag)
		}
		lt := libTailer[tj.Name]
		if tj.LagBytes == nil || *tj.LagBytes != lt.LagBytes || tj.Since == nil || !tj.Since.Equal(lt.UnackedSince) || tj.AgeMax == nil {
			t.Fatalf("%s: lag %v bytes, unacknowledged since %v, at most %v s; want %d bytes since %v", tj.Name, tj.LagBytes, tj.Since, tj.AgeMax, lt.LagBytes, lt.UnackedSince)
		}
		// The age is as of when stats ran.
		if at := tj.Since.Add(time.Duration(*tj.AgeMax * float64(time.Second))); at.Before(before.Add(-time.Millisecond)) || at.After(time.Now().Add(time.Millisecond)) {
			t.Errorf("%s: unacknowledged since %v, at most %v s old at %v: not between %v and now", tj.Name, tj.Since, *tj.AgeMax, at, before)
		}
		if w.acked == nil {
			if tj.AckedIndex != nil || tj.AckedCycle != nil || tj.AckedSeq != nil || tj.AckedUpTo != nil {
				t.Errorf("%s: acknowledged %v %v %v %v, want nulls", tj.Name, tj.AckedUpTo, tj.AckedIndex, tj.AckedCycle, tj.AckedSeq)
			}
			continue
		}
		c, s := queue.SplitIndex(*w.acked)
		if tj.AckedIndex == nil || tj.AckedCycle == nil || tj.AckedSeq == nil || tj.AckedUpTo == nil ||
			*tj.AckedIndex != *w.acked || *tj.AckedCycle != c || *tj.AckedSeq != s || *tj.AckedUpTo != fmt.Sprintf("%d:%d", c, s) {
			t.Errorf("%s: acknowledged %v %v %v %v, want %d:%d", tj.Name, tj.AckedUpTo, tj.AckedIndex, tj.AckedCycle, tj.AckedSeq, c, s)
		}
	}
}

// TestStatsWriters: the text form lists the writers' pids; JSON keeps
// the numbers.
func TestStatsWriters(t *testing.T) {
	q := newQueue(t, "a\n")
	lib, err := queue.Open(q, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if _, err := lib.Append([]byte("b")); err != nil {
		t.Fatal(err)
	}
	text, errOut, code := offqueue(t, "", "stats", q)
	if want := fmt.Sprintf("writers    1 (pid %d)\n", os.Getpid()); code != 0 || !strings.Contains(text, want) {
		t.Fatalf("stats: exit %d, %q; want %q in\n%s", code, errOut, want, text)
	}
	out, _, _ := offqueue(t, "", "stats", "--json", q)
	var st struct {
		Writers []int `json:"writers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Writers) != 1 || st.Writers[0] != os.Getpid() {
		t.Fatalf("stats --json: writers %v, %v", st.Writers, err)
	}
}

// TestFollowJSON: follow --json prints what dump --json does.
func TestFollowJSON(t *testing.T) {
	q := newQueue(t, "first\n")
	cmd := exec.Command(bin, "follow", q, "--json", "--from", "start")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(os.Interrupt)
	sc := bufio.NewScanner(out)
	offqueue(t, "\xfe\n", "append", q)
	for _, want := range []string{
		`{"index":"0:0","cycle":0,"seq":0,"length":5,"payload":"first"}`,
		`{"index":"0:1","cycle":0,"seq":1,"length":1,"payload_hex":"fe"}`,
	} {
		if !sc.Scan() || sc.Text() != want {
			t.Fatalf("follow --json printed %q, want %q", sc.Text(), want)
		}
	}
}

// TestHelpText: the overview lists every command with its whole summary;
// no help line is wider than 80 columns; the sample output in dump's help
// and the indexes in the examples are what a new daily queue gives.
func TestHelpText(t *testing.T) {
	overview, _, code := offqueue(t, "", "help")
	if code != 0 {
		t.Fatal("help failed")
	}
	helps := map[string]string{"overview": overview}
	for _, cmd := range commands {
		if !strings.Contains(overview, "\n  "+cmd.name+" ") || !strings.Contains(overview, " "+cmd.summary+"\n") {
			t.Errorf("the overview does not list %s: %s", cmd.name, cmd.summary)
		}
		for _, args := range [][]string{{cmd.name, "--help"}, {cmd.name, "-h"}, {"help", cmd.name}} {
			out, errOut, code := offqueue(t, "", args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: offqueue "+cmd.name+" "+cmd.synopsis+"\n") ||
				!strings.Contains(out, "\nexamples:\n  ") || !strings.Contains(out, " offqueue "+cmd.name+" ") {
				t.Errorf("offqueue %q: exit %d, no usage line or example:\n%s%s", args, code, out, errOut)
			}
			helps[cmd.name] = out
		}
	}
	for name, h := range helps {
		for _, line := range strings.Split(h, "\n") {
			if len(strings.ReplaceAll(line, "\t", "        ")) > 80 {
				t.Errorf("%s: a line wider than 80 columns: %q", name, line)
			}
			if strings.HasSuffix(line, ",") && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && name == "overview" {
				t.Errorf("overview: a command's summary is cut: %q", line)
			}
		}
	}

	// What the help shows is what a new daily queue prints.
	q := filepath.Join(t.TempDir(), "q")
	out, _, _ := offqueue(t, "hello\n\xff\x00\n", "append", q)
	if !strings.Contains(dumpCommand.help, "\n  0:0\t5\t\"hello\"\n  0:1\t2\tff00\n") {
		t.Fatal("dump's help lost its sample output")
	}
	if dump, _, _ := offqueue(t, "", "dump", q); dump != "0:0\t5\t\"hello\"\n0:1\t2\tff00\n" {
		t.Errorf("dump printed %q, unlike its help", dump)
	}
	var jsonSample []string
	for _, line := range strings.Split(dumpCommand.help, "\n") {
		if strings.HasPrefix(line, "  {") {
			jsonSample = append(jsonSample, strings.TrimPrefix(line, "  ")+"\n")
		}
	}
	if dump, _, _ := offqueue(t, "", "dump", "--json", q); dump != strings.Join(jsonSample, "") || len(jsonSample) != 2 {
		t.Errorf("dump --json printed %q, its help shows %q", dump, jsonSample)
	}
	q2 := filepath.Join(t.TempDir(), "q")
	out, _, _ = offqueue(t, "hello\nworld\n", "append", q2)
	if !strings.Contains(appendCommand.examples, `# prints "`+strings.TrimSuffix(out, "\n")+`" on a new daily queue`) {
		t.Errorf("append printed %q, unlike its example:\n%s", out, appendCommand.examples)
	}
	// Every index in the examples belongs to the first cycle, as the
	// messages of a new daily queue do.
	index := regexp.MustCompile(`\b(\d+):(\d+)\b`)
	for _, cmd := range commands {
		for _, m := range index.FindAllStringSubmatch(cmd.examples, -1) {
			if m[1] != "0" {
				t.Errorf("%s's example uses index %s, but a queue's first cycle is 0", cmd.name, m[0])
			}
		}
	}
}

// TestDumpSkip: --skip drops a prefix of every message (shorter messages
// print empty), in text and JSON, for dump and follow alike.
func TestDumpSkip(t *testing.T) {
	q := newQueue(t, "0123456789abcdefhello\nshort\n")
	out, errOut, code := offqueue(t, "", "dump", "--skip", "16", q)
	if code != 0 || out != "0:0\t5\t\"hello\"\n0:1\t0\t\"\"\n" {
		t.Fatalf("dump --skip 16: exit %d, %q %q", code, out, errOut)
	}
	out, _, code = offqueue(t, "", "dump", "--json", "--skip", "10", "-n", "1", q)
	if code != 0 || !strings.Contains(out, `"length":11,"payload":"abcdefhello"`) {
		t.Fatalf("dump --json --skip 10: exit %d, %q", code, out)
	}
	if _, errOut, code := offqueue(t, "", "dump", "--skip", "-1", q); code != 2 || !strings.Contains(errOut, `invalid value "-1" for --skip: negative`) {
		t.Fatalf("dump --skip -1: exit %d, %q", code, errOut)
	}
}

// TestChecksumMessages: append --checksum-messages makes a queue whose
// messages carry checksums, stats says so, and verify and dump report a
// message whose bytes were damaged on disk.
func TestChecksumMessages(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	if _, errOut, code := offqueue(t, "one\nsecret\n", "append", "--checksum-messages", q); code != 0 {
		t.Fatalf("append: exit %d %s", code, errOut)
	}
	out, _, code := offqueue(t, "", "stats", q)
	if code != 0 || !strings.Contains(out, "checksums  every message") || !strings.Contains(out, "format     3") {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	if _, _, code := offqueue(t, "", "verify", q); code != 0 {
		t.Fatalf("verify of a sound queue: exit %d", code)
	}
	cycles, _ := filepath.Glob(filepath.Join(q, "*.oq"))
	if len(cycles) != 1 {
		t.Fatalf("cycle files %q", cycles)
	}
	b, err := os.ReadFile(cycles[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("secret"))
	if at < 0 {
		t.Fatal("message not found in the cycle file")
	}
	b[at] = 'S'
	if err := os.WriteFile(cycles[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := offqueue(t, "", "verify", q); code == 0 || !strings.Contains(out+errOut, "fails its checksum") {
		t.Errorf("verify of a damaged message: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := offqueue(t, "", "dump", q); code == 0 || !strings.Contains(out, "one") || strings.Contains(out, "Secret") || !strings.Contains(errOut, "fails its checksum") {
		t.Errorf("dump of a damaged message: exit %d\n%s%s", code, out, errOut)
	}
}

// TestStatsSkipped: stats shows queue.meta's count of dead writers' slots
// skipped (offset 448), in text and JSON.
func TestStatsSkipped(t *testing.T) {
	q := newQueue(t, "a\n")
	damage(t, q, "queue.meta", 448, []byte{7, 1, 0, 0, 0, 0, 0, 0}) // 263
	text, _, code := offqueue(t, "", "stats", q)
	if code != 0 || !strings.Contains(text, "skipped    263 slots of dead writers\n") {
		t.Errorf("stats: exit %d\n%s", code, text)
	}
	out, _, code := offqueue(t, "", "stats", "--json", q)
	var st struct {
		SkippedSlots uint64 `json:"skipped_slots"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.SkippedSlots != 263 {
		t.Errorf("stats --json: exit %d, %v, skipped %d\n%s", code, err, st.SkippedSlots, out)
	}
}

// jsonTailer is a named tailer in `offqueue stats --json`.
type jsonTailer struct {
	Name       string     `json:"name"`
	AckedUpTo  *string    `json:"acknowledged_up_to"`
	AckedCycle *uint32    `json:"acknowledged_cycle"`
	AckedSeq   *uint32    `json:"acknowledged_seq"`
	AckedIndex *uint64    `json:"acknowledged_index"`
	Lag        *int64     `json:"lag"`
	LagBytes   *int64     `json:"lag_bytes"`
	Since      *time.Time `json:"unacked_since"`
	AgeMax     *float64   `json:"unacked_age_max_seconds"`
}
