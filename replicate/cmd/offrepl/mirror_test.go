package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/internal/kafkaoffset"
	"github.com/offmap/offmap/replicate/mirror"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMirrorHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"mirror", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("mirror --help: exit %d, %s", code, errOut.String())
	}
	for _, want := range []string{"usage: offrepl mirror", "--queue DIR", "--name NAME", "--source ID", "--nats URLS", "--stream NAME",
		"--subject SUBJECT", "--replicas N", "--kafka HOSTS", "--topic TOPIC", "--partition PARTITION", "examples:", "offrepl mirror --queue"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("mirror --help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMirrorUsageErrors(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "a", "--nats", "nats://x", "--stream", "S", "--subject", "s"}, "--queue and --source are required"},
		{[]string{"--queue", dir, "--nats", "nats://x", "--stream", "S", "--subject", "s"}, "--queue and --source are required"},
		{[]string{"--queue", t.TempDir(), "--source", "a", "--nats", "nats://x", "--stream", "S", "--subject", "s"}, "not a queue"},
		{[]string{"--queue", dir, "--source", "a"}, "give one of --nats"},
		{[]string{"--queue", dir, "--source", "a", "--nats", "nats://x", "--stream", "S"}, "--nats needs --stream and --subject"},
		{[]string{"--queue", dir, "--source", "a", "--nats", "nats://x", "--stream", "S", "--subject", "s", "--replicas", "0"}, "--replicas 0"},
		{[]string{"--queue", dir, "--source", "a", "--kafka", "k:9092"}, "--kafka needs --topic"},
		{[]string{"--queue", dir, "--source", "a", "--kafka", "k:9092", "--topic", "t", "--sasl", "md5"}, `--sasl "md5"`},
		{[]string{"--queue", dir, "--source", "a", "--kafka", "k:9092", "--topic", "t", "--partition", "-1"}, "invalid configuration"},
		{[]string{"--queue", dir, "--source", "a", "--kafka", "k:9092", "--topic", "t", "--window", "-1"}, `invalid value "-1" for --window: negative`},
		{[]string{"--queue", dir, "--source", "a", "--kafka", "k:9092", "--topic", "t", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"mirror"}, tc.args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("mirror %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// TestMirrorRun runs offrepl mirror as a process of its own against an
// embedded JetStream server (creating the stream) and a kfake cluster,
// waits until the engine holds the queue, and stops it with SIGTERM: it
// must exit 0 after printing progress lines.
func TestMirrorRun(t *testing.T) {
	const n = 500
	t.Run("jetstream", func(t *testing.T) {
		c, _, js := enginetest.NATSForTest(t, 1)
		stored := func() int {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := js.Stream(ctx, "S")
			if err != nil {
				return 0
			}
			info, err := st.Info(ctx)
			if err != nil {
				return 0
			}
			return int(info.State.Msgs)
		}
		dir := mirrorQueue(t, n)
		runMirrorCmd(t, dir, n, stored, "--nats", c.URLs(), "--stream", "S", "--subject", "s", "--replicas", "1")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "S")
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= n; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Data) != strconv.FormatUint(seq-1, 10) || m.Header.Get(mirror.HeaderSource) != "a" {
				t.Fatalf("message %d: %q from %q", seq, m.Data, m.Header.Get(mirror.HeaderSource))
			}
		}
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
		stored := func() int {
			// The end offset counts the records and each
			// transaction's commit marker, so it is reached after
			// all n records are committed.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			end, err := kafkaoffset.List(ctx, cl, "t", 0, kafkaoffset.Latest)
			if err != nil {
				return 0
			}
			return int(end)
		}
		dir := mirrorQueue(t, n)
		runMirrorCmd(t, dir, n, stored, "--kafka", strings.Join(c.ListenAddrs(), ","), "--topic", "t")
	})
}

// mirrorQueue makes a queue holding the n messages "0", "1", ...
func mirrorQueue(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for i := range n {
		if _, err := q.Append([]byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runMirrorCmd runs offrepl mirror on dir with the engine flags, waits
// until stored() reaches n and a progress line shows no lag, then sends
// SIGTERM and expects exit status 0.
func runMirrorCmd(t *testing.T, dir string, n int, stored func() int, engine ...string) {
	t.Helper()
	cmd := reexec.Command(append([]string{"mirror", "--queue", dir, "--source", "a", "--progress", "50ms"}, engine...)...)
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
	exited := make(chan error, 1)
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	}()
	printed := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, want) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(2 * time.Minute)
	for stored() < n || !printed(fmt.Sprintf("mirror: sent %d, acked %d, lag 0", n, n)) {
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("engine holds %d of %d after 2 minutes; stdout:\n%s\nstderr:\n%s", stored(), n, strings.Join(lines, "\n"), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("offrepl mirror after SIGTERM: %v; stderr:\n%s", err, errOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("offrepl mirror still running a minute after SIGTERM")
	}
	if !printed("mirror: stopped: sent") {
		t.Fatalf("no line for the stop; stdout:\n%s", strings.Join(lines, "\n"))
	}
}
