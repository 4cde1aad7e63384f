package edasplit

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/ingest"
)

// runSplit runs instances of the split chain for a short while on a
// one-node engine, the bridge's consumers given fault f, and returns the
// result, the bridges' counts and the run's error.
func runSplit(t *testing.T, o SplitOptions, instances int, f fault, length, grace time.Duration) (*eda.Result, []BridgeStats, error) {
	t.Helper()
	var tr *Split
	wait := eda.Block
	if o.Shared {
		wait = eda.Park
	}
	cfg := eda.Config{
		Instances: instances, Rate: 1000, Wait: wait, Placement: eda.InProcess,
		Runs: 1, RunLength: length, Grace: grace, Dir: t.TempDir(),
		Transport: func(dir string) (eda.Transport, error) {
			var err error
			tr, err = NewSplit(dir, o)
			if tr != nil {
				tr.fault = f
			}
			return tr, err
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	r, err := eda.Run(ctx, cfg)
	if tr == nil {
		t.Fatalf("the transport was not made: %v", err)
	}
	return r, tr.Stats(), err
}

// TestExactlyOnce runs the chain through the bridge and checks that every
// message arrived exactly once: the chain's counts, and each stage of the
// bridge.
func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	r, stats, err := runSplit(t, SplitOptions{}, 1, fault{}, time.Second, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 {
		t.Fatalf("%d bridges, want 1", len(stats))
	}
	if r.Sent < 1000 {
		t.Fatalf("the plan sent %d messages, want at least 1000 (one second at 1000/s)", r.Sent)
	}
	if err := ExactlyOnce(r, stats); err != nil {
		t.Fatal(err)
	}
	if r.EndToEnd.Count == 0 {
		t.Fatal("no end-to-end latency recorded")
	}
	s := stats[0]
	t.Logf("sent %d; bridge: appended %d, mirrored %d (sent %d, duplicates %d, restarts %d), ingested %d, read %d; p99.9 %.2f ms",
		r.Sent, s.Produced, s.Acked, s.Sent, s.Duplicates, s.Restarts, s.Ingested, s.Consumed, float64(r.EndToEnd.P999)/1e6)
}

// TestExactlyOnceShared is TestExactlyOnce with three instances over one
// shared bridge: each service 3 must get its own instance's messages.
func TestExactlyOnceShared(t *testing.T) {
	t.Parallel()
	r, stats, err := runSplit(t, SplitOptions{Shared: true}, 3, fault{}, 500*time.Millisecond, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Topics != 3 {
		t.Fatalf("bridges %+v, want one of 3 topics", stats)
	}
	if err := ExactlyOnce(r, stats); err != nil {
		t.Fatal(err)
	}
}

// TestDetectsFaults proves the checks are not vacuous: a bridge that loses
// a message, or delivers one twice, fails them, and for that reason (not
// for lateness: the counts must be off by exactly the one message).
func TestDetectsFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    fault
		off  int64 // delivered - sent
	}{
		{"lost", fault{drop: true, at: 100}, -1},
		{"duplicated", fault{dup: true, at: 100}, +1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The lost message is waited for until the grace ends.
			r, stats, err := runSplit(t, SplitOptions{}, 1, tc.f, 500*time.Millisecond, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			err = ExactlyOnce(r, stats)
			if err == nil {
				t.Fatalf("a %s message passed the check: %+v, %+v", tc.name, r, stats)
			}
			if len(stats) != 1 || r.Delivered-r.Sent != tc.off || stats[0].Consumed-stats[0].Produced != tc.off {
				t.Fatalf("the check failed, but not by the one %s message: %v", tc.name, err)
			}
			t.Logf("caught: %v", err)
		})
	}
}

// TestConsumerSequence checks the consumer's own check of the engine's
// sequences on a queue filled by hand: a repeated or skipped sequence is
// an error, a message from another stream too.
func TestConsumerSequence(t *testing.T) {
	const src = "jetstream:S"
	frame := func(tag uint32, seq uint64, payload string) []byte {
		b := []byte("OFI\x01")
		b = binary.LittleEndian.AppendUint32(b, tag)
		b = binary.LittleEndian.AppendUint64(b, seq)
		return append(b, payload...)
	}
	for _, tc := range []struct {
		name string
		seqs []uint64
		tag  uint32
		want string // in the error; empty: no error
	}{
		{"in order", []uint64{1, 2, 3}, ingest.SourceTag(src), ""},
		{"repeat", []uint64{1, 2, 2}, ingest.SourceTag(src), "duplicated"},
		{"gap", []uint64{1, 3}, ingest.SourceTag(src), "lost"},
		{"other stream", []uint64{1}, ingest.SourceTag("jetstream:T"), "source tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := queue.Open(t.TempDir(), queue.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			for _, s := range tc.seqs {
				if _, err := q.Append(frame(tc.tag, s, "payload")); err != nil {
					t.Fatal(err)
				}
			}
			tl, err := q.Tailer()
			if err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			var failed atomic.Pointer[error]
			c := &bridgeConsumer{b: &bridge{source: ingest.SourceTag(src)}, t: tl, topic: "S", next: 1, err: &failed}
			var got error
			for range tc.seqs {
				msg, ok, err := c.Poll()
				if err != nil {
					got = err
					break
				}
				if !ok || string(msg) != "payload" {
					t.Fatalf("Poll = %q, %v", msg, ok)
				}
			}
			switch {
			case tc.want == "" && got != nil:
				t.Fatal(got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", got, tc.want)
			}
		})
	}
}

// TestConsumerShared checks the routing of a shared bridge: a consumer
// returns the messages of its tag only, without the tag, and still checks
// every sequence, other topics' included.
func TestConsumerShared(t *testing.T) {
	src := ingest.SourceTag("jetstream:bridge")
	q, err := queue.Open(t.TempDir(), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for seq, tag := range []uint64{1, 2, 1, 1, 2} {
		b := []byte("OFI\x01")
		b = binary.LittleEndian.AppendUint32(b, src)
		b = binary.LittleEndian.AppendUint64(b, uint64(seq+1))
		b = binary.LittleEndian.AppendUint64(b, tag)
		b = fmt.Appendf(b, "m%d", seq+1)
		if _, err := q.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	var failed atomic.Pointer[error]
	br := &bridge{source: src}
	for tag, want := range map[uint32][]string{1: {"m1", "m3", "m4"}, 2: {"m2", "m5"}} {
		tl, err := q.Tailer()
		if err != nil {
			t.Fatal(err)
		}
		c := &bridgeConsumer{b: br, t: tl, topic: "S", tag: tag, next: 1, err: &failed}
		var got []string
		for {
			msg, ok, err := c.Poll()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, string(msg))
		}
		tl.Close()
		if !slices.Equal(got, want) {
			t.Errorf("tag %d: got %q, want %q", tag, got, want)
		}
	}
	if n := br.consumed.Load(); n != 5 {
		t.Errorf("consumed %d, want 5", n)
	}
}
