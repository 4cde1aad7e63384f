package ingest

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/queue"
)

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	js := &JetStream{URLs: "nats://127.0.0.1:1", Stream: "S"}
	q, err := queue.Open(filepath.Join(dir, "ro"), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	ro, err := queue.Open(filepath.Join(dir, "ro"), queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	one, err := queue.Open(filepath.Join(dir, "one"), queue.Options{KeepCycles: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for name, cfg := range map[string]Config{
		"one cycle kept, the caller's queue": {Queue: one, JetStream: js},
		"no queue":                           {JetStream: js},
		"two queues":                         {Dir: dir, Queue: ro, JetStream: js},
		"read-only":                          {Queue: ro, JetStream: js},
		"no source":                          {Dir: dir},
		"two sources":                        {Dir: dir, JetStream: js, Kafka: &Kafka{Seeds: []string{"k:1"}, Topic: "t"}},
		"no URLs":                            {Dir: dir, JetStream: &JetStream{Stream: "S"}},
		"bad stream":                         {Dir: dir, JetStream: &JetStream{URLs: "nats://x", Stream: "a.b"}},
		"no seeds":                           {Dir: dir, Kafka: &Kafka{Topic: "t"}},
		"no topic":                           {Dir: dir, Kafka: &Kafka{Seeds: []string{"k:1"}}},
		"partition":                          {Dir: dir, Kafka: &Kafka{Seeds: []string{"k:1"}, Topic: "t", Partition: -1}},
		"one cycle kept":                     {Dir: dir, JetStream: js, QueueOptions: queue.Options{KeepCycles: 1}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New error %v, want ErrConfig", name, err)
		}
	}
}

// TestQueueChecks: New refuses a queue another ingest writes to, a queue
// whose last message is not ingest's, and one filled from another source;
// Run refuses to run twice at once and after Close.
func TestQueueChecks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	cfg := Config{Dir: dir, JetStream: &JetStream{URLs: "nats://127.0.0.1:1", Stream: "A"}, RetryMin: time.Millisecond, RetryMax: time.Millisecond}
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := in.Progress(); p.Stored != 0 || p.Lag != -1 || p.Source != "jetstream:A" || !strings.Contains(p.String(), "engine last unknown") {
		t.Fatalf("new queue: %+v (%s)", p, p)
	}
	if _, err := New(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second ingest on the queue: %v, want ErrLocked", err)
	}

	// The engine is unreachable: Run keeps trying, and says why.
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- in.Run(ctx) }()
	waitFor(t, time.Minute, "Progress to report the unreachable engine", func() bool { return in.Progress().Err != nil })
	if err := in.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("Run while running: %v, want ErrRunning", err)
	}
	if err := in.Close(); err == nil {
		t.Fatal("Close while Run runs: no error")
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run after cancel: %v, want nil", err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if err := in.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}

	// A message from stream A, then one from nowhere.
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	msg := make([]byte, FrameSize+1)
	putFrame(msg, Frame{Seq: 41, Source: SourceTag(jetStreamName("A"))})
	if _, err := q.Append(msg); err != nil {
		t.Fatal(err)
	}
	in, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := in.Progress(); p.Stored != 41 {
		t.Fatalf("Stored = %d, want 41", p.Stored)
	}
	in.Close()
	other := cfg
	other.JetStream = &JetStream{URLs: "nats://127.0.0.1:1", Stream: "B"}
	if _, err := New(other); !errors.Is(err, ErrSourceMismatch) {
		t.Fatalf("queue of stream A, ingest of B: %v, want ErrSourceMismatch", err)
	}
	if _, err := q.Append([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("foreign last message: %v, want ErrNoFrame", err)
	}
	// Given the queue rather than its directory, the same.
	if _, err := New(Config{Queue: q, JetStream: cfg.JetStream}); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("foreign last message, queue given: %v, want ErrNoFrame", err)
	}
}
