package ingest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/offmap/offmap/queue"
)

// killTestSize is the number of messages and of kills of the kill tests.
func killTestSize() (total, kills int) {
	switch {
	case testing.Short():
		return 2_000, 4
	case raceEnabled:
		return 5_000, 6
	}
	return 50_000, 10
}

// killAndResume runs the ingest in helper processes, SIGKILLs each after
// a random time (while it connects, catches up, or waits), starts the
// next, and so on while publish feeds the engine; then lets a last one
// catch up and stops it with SIGTERM. A local tailer reads the queue the
// whole time. It returns that tailer for the caller's comparison with the
// engine.
func killAndResume(t *testing.T, spec helperSpec, tag uint32, first int64, total int, kills int, publish func(ctx context.Context, published *atomic.Int64) error) *reader {
	q, err := queue.Open(spec.Dir, queue.Options{Roll: spec.Roll})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r := startReader(t, q, tag, first, true)
	defer r.stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a loaded 2-core machine
	defer cancel()
	var published atomic.Int64 // messages the engine has
	var publishing atomic.Bool // until publish returns: more may come
	publishing.Store(true)
	pubDone := make(chan error, 1)
	go func() {
		err := publish(ctx, &published)
		publishing.Store(false)
		pubDone <- err
	}()

	// Each ingest is killed at a random instant: a quarter of them (never
	// the first) while starting (opening, connecting), the others once
	// they are appending, within the next 50 ms (so mostly while catching
	// up).
	start := time.Now()
	active := 0 // kills that found the ingest appending
	for i := 0; i < kills; i++ {
		h := startHelper(t, spec)
		if rand.N(4) == 0 && i > 0 { // the first always once it appends: one kill at least must test that
			time.Sleep(time.Duration(rand.N(100)) * time.Millisecond)
		} else {
			// Until it appends; one that has caught up waits for the next
			// burst, unless none is coming.
			base := r.n.Load()
			deadline := time.Now().Add(time.Minute)
			for r.n.Load() == base && (base < published.Load() || publishing.Load()) && time.Now().Before(deadline) && r.failed() == nil {
				time.Sleep(time.Millisecond)
			}
			if r.n.Load() != base {
				active++
			}
			time.Sleep(time.Duration(rand.N(50)) * time.Millisecond)
		}
		if err := h.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		h.Wait()
		if err := r.failed(); err != nil {
			t.Fatalf("local tailer after kill %d: %v", i+1, err)
		}
	}
	t.Logf("%v: %d kills, %d of them while appending; %d messages stored", time.Since(start).Round(time.Millisecond), kills, active, r.n.Load())
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: all %d published", time.Since(start).Round(time.Millisecond), total)
	h := startHelper(t, spec)
	r.waitCount(t, total, 5*time.Minute)
	t.Logf("%v: all stored", time.Since(start).Round(time.Millisecond))
	if err := h.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatalf("ingest after SIGTERM: %v, want a clean exit", err)
	}
	if active == 0 {
		t.Errorf("no kill found the ingest appending: the test did not test")
	}
	lost, err := q.Check()
	if err != nil {
		t.Fatalf("queue check: %v", err)
	}
	t.Logf("%d slots torn by the kills", len(lost))
	return r
}

// TestJetStreamKillResume: messages published to an R3 stream on a
// 3-node cluster, while ingest processes are SIGKILLed at random instants
// and restarted, end up in the queue exactly as in the stream: same
// sequences in the same order, each once, no gap, same payloads.
func TestJetStreamKillResume(t *testing.T) {
	total, kills := killTestSize()
	c, js := natsCluster(t, 3)
	createStream(t, js, "ORDERS", 3)
	spec := helperSpec{Role: "ingest", Dir: filepath.Join(t.TempDir(), "q"), Roll: queue.Secondly, URLs: c.URLs(), Stream: "ORDERS"}
	r := killAndResume(t, spec, SourceTag(jetStreamName("ORDERS")), 1, total, kills, func(ctx context.Context, published *atomic.Int64) error {
		// in bursts, so that kills find the ingest both catching up and idle
		for i := 0; i < total; {
			n := min(total-i, 1+rand.N(total/8))
			if err := publishAsync(ctx, js, "orders.new", i, i+n); err != nil {
				return err
			}
			i += n
			published.Store(int64(i))
			time.Sleep(time.Duration(rand.N(200)) * time.Millisecond)
		}
		return nil
	})
	seqs, msgs := readStream(t, js, "ORDERS")
	if len(seqs) != total || seqs[0] != 1 || seqs[len(seqs)-1] != uint64(total) {
		t.Fatalf("the stream holds %d messages, want %d from 1", len(seqs), total)
	}
	r.sameAsEngine(t, seqs, msgs)
}

// TestJetStreamEngineRestart: while an ingest runs, a node of the
// cluster stops (the ingest fails over), then the whole cluster stops:
// the ingest reports the error and retries, a local tailer still reads
// everything stored, and once the cluster is back the ingest catches up.
func TestJetStreamEngineRestart(t *testing.T) {
	const batch = 1000
	start := time.Now()
	phase := func(what string) { t.Logf("%v: %s", time.Since(start).Round(time.Millisecond), what) }
	c, js := natsCluster(t, 3)
	createStream(t, js, "EVENTS", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := publishRetry(ctx, js, "events.a", 0, batch); err != nil {
		t.Fatal(err)
	}
	in, err := New(Config{
		Dir:       filepath.Join(t.TempDir(), "q"),
		JetStream: &JetStream{URLs: c.URLs(), Stream: "EVENTS"},
		RetryMin:  20 * time.Millisecond, RetryMax: time.Second,
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tag := SourceTag(jetStreamName("EVENTS"))
	r := startReader(t, in.Queue(), tag, 1, true)
	defer r.stop() // before in.Close
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- in.Run(runCtx) }()

	r.waitCount(t, batch, time.Minute)
	phase("first batch stored")
	waitFor(t, time.Minute, "the lag to read 0", func() bool {
		p := in.Progress()
		return p.Stored == batch && p.Last == batch && p.Lag == 0
	})

	// One node down: clients and the stream fail over to the others.
	c.Stop(0)
	if err := publishRetry(ctx, js, "events.b", batch, 2*batch); err != nil {
		t.Fatal(err)
	}
	r.waitCount(t, 2*batch, 2*time.Minute)
	phase("second batch stored, with a node down")

	// The whole engine down: the ingest says so and keeps trying, and
	// the queue goes on serving its readers.
	c.Stop(1)
	c.Stop(2)
	waitFor(t, time.Minute, "Progress to report the engine unreachable", func() bool { return in.Progress().Err != nil })
	phase(fmt.Sprintf("engine down: %v", in.Progress()))
	late := startReader(t, in.Queue(), tag, 1, true) // a tailer started while the engine is away
	late.waitCount(t, 2*batch, time.Minute)
	late.stop()
	select {
	case err := <-ran:
		t.Fatalf("Run returned while the engine was down: %v", err)
	default:
	}

	for i := range 3 {
		if err := c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}
	phase("engine back")
	if err := publishRetry(ctx, js, "events.c", 2*batch, 3*batch); err != nil {
		t.Fatal(err)
	}
	r.waitCount(t, 3*batch, 2*time.Minute)
	phase("third batch stored")
	waitFor(t, time.Minute, "the lag to read 0 and the error to clear", func() bool {
		p := in.Progress()
		return p.Stored == 3*batch && p.Lag == 0 && p.Err == nil
	})
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	seqs, msgs := readStream(t, js, "EVENTS")
	r.sameAsEngine(t, seqs, msgs)
}

// TestTornAppend: a writer killed between claiming a message's slot and
// committing it leaves a slot that is never complete. A new ingest
// resumes after the last complete message, appends the torn one again,
// and readers see every sequence once.
func TestTornAppend(t *testing.T) {
	const total, stored = 20, 7
	c, js := natsCluster(t, 1)
	createStream(t, js, "T", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Sequence s holds payload(s), which the torn writer wrote too.
	if err := publishRetry(ctx, js, "t.x", 1, total+1); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "q")
	h := startHelper(t, helperSpec{Role: "torn", Dir: dir, Stream: "T", Stored: stored})
	h.Process.Signal(syscall.SIGKILL)
	h.Wait()

	in, err := New(Config{Dir: dir, JetStream: &JetStream{URLs: c.URLs(), Stream: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if p := in.Progress(); p.Stored != stored {
		t.Fatalf("after the torn append, Stored = %d, want %d", p.Stored, stored)
	}
	r := startReader(t, in.Queue(), SourceTag(jetStreamName("T")), 1, true)
	defer r.stop() // before in.Close
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- in.Run(runCtx) }()
	r.waitCount(t, total, time.Minute)
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	seqs, msgs := readStream(t, js, "T")
	r.sameAsEngine(t, seqs, msgs)
	lost, err := in.Queue().Check()
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0].To-lost[0].From != 1 {
		t.Fatalf("lost index ranges %v, want the one torn slot", lost)
	}
}

// TestGapAndReset: a message deleted from the stream is no gap; the
// engine's retention removing messages the queue lacks is (ErrGap, or a
// logged jump with AllowGaps); the stream recreated behind the queue is
// ErrSourceReset.
func TestGapAndReset(t *testing.T) {
	c, js := natsCluster(t, 1)
	s := createStream(t, js, "G", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "q")
	cfg := Config{Dir: dir, JetStream: &JetStream{URLs: c.URLs(), Stream: "G"}, RetryMin: 10 * time.Millisecond}
	run := func(cfg Config, until func(*Ingest) bool) error {
		t.Helper()
		in, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		ran := make(chan error, 1)
		go func() { ran <- in.Run(runCtx) }()
		deadline := time.After(time.Minute)
		for !until(in) {
			select {
			case err := <-ran:
				return err
			case <-deadline:
				t.Fatalf("timed out: %v", in.Progress())
			case <-time.After(10 * time.Millisecond):
			}
		}
		stop()
		return <-ran
	}
	storedIs := func(n int64) func(*Ingest) bool {
		return func(in *Ingest) bool { return in.Progress().Stored == n }
	}

	if err := publishRetry(ctx, js, "g.x", 1, 6); err != nil {
		t.Fatal(err)
	}
	if err := run(cfg, storedIs(5)); err != nil {
		t.Fatal(err)
	}
	// 7 deleted before the ingest saw it: a jump, no gap.
	if err := publishRetry(ctx, js, "g.x", 6, 9); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := run(cfg, storedIs(8)); err != nil {
		t.Fatal(err)
	}
	// 9 and 10 published while the ingest is stopped, then removed.
	if err := publishRetry(ctx, js, "g.x", 9, 11); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	never := func(*Ingest) bool { return false }
	if err := run(cfg, never); !errors.Is(err, ErrGap) {
		t.Fatalf("Run after a purge: %v, want ErrGap", err)
	}
	if err := publishRetry(ctx, js, "g.x", 11, 13); err != nil {
		t.Fatal(err)
	}
	cfg.AllowGaps = true
	if err := run(cfg, storedIs(12)); err != nil {
		t.Fatal(err)
	}
	cfg.AllowGaps = false

	// The stream deleted and made again: its sequences start over.
	if err := js.DeleteStream(ctx, "G"); err != nil {
		t.Fatal(err)
	}
	createStream(t, js, "G", 1)
	if err := publishRetry(ctx, js, "g.x", 100, 103); err != nil {
		t.Fatal(err)
	}
	if err := run(cfg, never); !errors.Is(err, ErrSourceReset) {
		t.Fatalf("Run after the stream was recreated: %v, want ErrSourceReset", err)
	}

	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var got []uint64
	for _, msg := range tl.All() {
		f, _, err := Split(msg)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Seq)
	}
	if want := []uint64{1, 2, 3, 4, 5, 6, 8, 11, 12}; !equal(got, want) {
		t.Fatalf("queue holds sequences %v, want %v", got, want)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestJetStreamSubjectFilter: with a filter, the queue holds the matching
// messages only, with their stream sequences (which jump over the other
// subjects'), and a restart resumes after the last one stored.
func TestJetStreamSubjectFilter(t *testing.T) {
	c, js := natsCluster(t, 1)
	createStream(t, js, "F", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			subject := map[bool]string{true: "f.a", false: "f.b"}[i%3 == 0]
			if _, err := js.Publish(ctx, subject, payload(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := Config{Dir: filepath.Join(t.TempDir(), "q"), JetStream: &JetStream{URLs: c.URLs(), Stream: "F", Subject: "f.a"}}
	ingestUntil := func(stored int64) {
		t.Helper()
		in, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- in.Run(runCtx) }()
		waitFor(t, time.Minute, fmt.Sprintf("sequence %d stored", stored), func() bool { return in.Progress().Stored == stored })
		stop()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
	}
	publish(0, 10) // f.a at sequences 1, 4, 7, 10
	ingestUntil(10)
	publish(10, 20) // and 13, 16, 19
	ingestUntil(19)

	q, err := queue.Open(cfg.Dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var got []uint64
	for _, msg := range tl.All() {
		f, p, err := Split(msg)
		if err != nil {
			t.Fatal(err)
		}
		if string(p) != string(payload(int(f.Seq)-1)) {
			t.Fatalf("sequence %d: payload %x, want %x", f.Seq, p, payload(int(f.Seq)-1))
		}
		got = append(got, f.Seq)
	}
	if want := []uint64{1, 4, 7, 10, 13, 16, 19}; !equal(got, want) {
		t.Fatalf("queue holds sequences %v, want %v", got, want)
	}
}
