package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/ingest"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestIngestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"ingest", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("ingest --help: exit %d, %s", code, errOut.String())
	}
	for _, want := range []string{"usage: offrepl ingest", "--queue DIR", "--nats URLS", "--stream NAME", "--kafka HOSTS", "--topic TOPIC", "--partition N", "examples:", "offrepl ingest --queue"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ingest --help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestIngestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats", "nats://x", "--stream", "S"}, "--queue is required"},
		{[]string{"--queue", dir}, "give one of --nats"},
		{[]string{"--queue", dir, "--nats", "nats://x", "--kafka", "k:9092", "--stream", "S"}, "give one of --nats"},
		{[]string{"--queue", dir, "--nats", "nats://x"}, "--nats needs --stream"},
		{[]string{"--queue", dir, "--kafka", "k:9092"}, "--kafka needs --topic"},
		{[]string{"--queue", dir, "--kafka", "k:9092", "--topic", "t", "--sasl", "md5"}, `--sasl "md5"`},
		{[]string{"--queue", dir, "--nats", "nats://x", "--stream", "a.b"}, "invalid configuration"},
		{[]string{"--queue", dir, "--nats", "nats://x", "--stream", "S", "--roll", "weekly"}, `--roll "weekly"`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"ingest"}, tc.args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("ingest %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// TestIngestRun runs offrepl ingest as a process against each engine,
// waits until the queue holds what was published and the progress line
// shows no lag, then stops it with SIGTERM: exit status 0.
func TestIngestRun(t *testing.T) {
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Run("jetstream", func(t *testing.T) {
		c, _, js := enginetest.NATSForTest(t, 1)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := js.Publish(ctx, "s.x", []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		runIngest(t, n, 1, "--nats", c.URLs(), "--stream", "S")
	})
	t.Run("kafka", func(t *testing.T) {
		c, err := enginetest.StartKafka("", 1)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.CreateTopic("t", 1, nil); err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		runIngest(t, n, 0, "--kafka", strings.Join(c.ListenAddrs(), ","), "--topic", "t")
	})
}

// runIngest runs offrepl ingest with the engine flags given, checks that
// the queue receives the n messages {0}, {1}, ... with sequences from
// first, and stops it.
func runIngest(t *testing.T, n int, first uint64, engine ...string) {
	dir := filepath.Join(t.TempDir(), "q")
	cmd := reexec.Command(append([]string{"ingest", "--queue", dir, "--progress", "50ms"}, engine...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var errOut safeBuffer
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	var mu sync.Mutex
	var lines []string
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	printed := func(want ...string) bool {
		mu.Lock()
		defer mu.Unlock()
	next:
		for _, l := range lines {
			for _, w := range want {
				if !strings.Contains(l, w) {
					continue next
				}
			}
			return true
		}
		return false
	}

	// Wait for the queue to exist, then read the n messages from it.
	deadline := time.Now().Add(time.Minute)
	var q *queue.Queue
	for q == nil {
		if _, err := os.Stat(filepath.Join(dir, "queue.meta")); err == nil {
			if q, err = queue.Open(dir, queue.Options{ReadOnly: true}); err != nil {
				t.Fatal(err)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("no queue made in %s; stderr: %s", dir, errOut.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	defer q.Close()
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for i := 0; i < n; {
		if err := tl.Wait(ctx, queue.Block); err != nil {
			t.Fatalf("read %d of %d messages: %v; stderr: %s", i, n, err, errOut.String())
		}
		_, msg, err := tl.Next()
		if errors.Is(err, queue.ErrNoMessage) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f, p, err := ingest.Split(msg)
		if err != nil {
			t.Fatal(err)
		}
		if f.Seq != first+uint64(i) || len(p) != 1 || p[0] != byte(i) {
			t.Fatalf("message %d: sequence %d payload %x; want %d and %x", i, f.Seq, p, first+uint64(i), []byte{byte(i)})
		}
		i++
	}
	// The progress line catches up: no lag.
	for !printed("ingest: ", "lag 0") {
		select {
		case <-eof:
			t.Fatalf("offrepl ended early; stderr: %s", errOut.String())
		case <-ctx.Done():
			t.Fatalf("no progress line with lag 0; stderr: %s", errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-eof
	if err := cmd.Wait(); err != nil {
		t.Fatalf("offrepl ingest after SIGTERM: %v, want exit 0; stderr: %s", err, errOut.String())
	}
	if !printed("ingest: stopped: ") {
		t.Errorf("no 'stopped' line after SIGTERM")
	}
}
