package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestReplicaHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"replica", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("replica --help: exit %d, %s", code, errOut.String())
	}
	for _, want := range []string{"usage: offrepl replica", "--map FILE", "--entries N", "--avg-key BYTES", "--avg-value BYTES",
		"--nats URLS", "--bucket NAME", "--replicas N", "--kafka HOSTS", "--topic TOPIC", "--resync", "examples:", "offrepl replica --map"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("replica --help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReplicaUsageErrors(t *testing.T) {
	m := filepath.Join(t.TempDir(), "m")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats", "nats://x", "--bucket", "b"}, "--map is required"},
		{[]string{"--map", m}, "give one of --nats"},
		{[]string{"--map", m, "--nats", "nats://x", "--kafka", "k:9092", "--bucket", "b"}, "give one of --nats"},
		{[]string{"--map", m, "--nats", "nats://x"}, "--nats needs --bucket"},
		{[]string{"--map", m, "--kafka", "k:9092"}, "--kafka needs --topic"},
		{[]string{"--map", m, "--kafka", "k:9092", "--topic", "t", "--sasl", "md5"}, `--sasl "md5"`},
		{[]string{"--map", m, "--kafka", "k:9092", "--topic", "t", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--map", m, "--nats", "nats://x", "--bucket", "a.b"}, "not a bucket name"},
		{[]string{"--map", m, "--nats", "nats://x", "--bucket", "b", "--entries", "x"}, "invalid value"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"replica", "--progress", "0"}, tc.args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	if _, err := os.Stat(m); err == nil {
		t.Errorf("a command line with errors created the map")
	}
}

// TestReplicaRun runs offrepl replica as a process against each engine:
// it creates the bucket (or the compacted topic), keeps the map equal to
// what a writer puts and deletes, prints progress, and exits 0 on
// SIGTERM.
func TestReplicaRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Run("jetstream", func(t *testing.T) {
		c, _, js := enginetest.NATSForTest(t, 1)
		replicaRun(t, ctx, []string{"--nats", c.URLs(), "--bucket", "b", "--history", "2"}, "created bucket b",
			func(k string, v []byte) error {
				kv, err := js.KeyValue(ctx, "b")
				if err != nil {
					return err
				}
				if v == nil {
					return kv.Delete(ctx, k)
				}
				_, err = kv.Put(ctx, k, v)
				return err
			})
	})
	t.Run("kafka", func(t *testing.T) {
		c, err := enginetest.StartKafka("", 1)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		replicaRun(t, ctx, []string{"--kafka", strings.Join(c.ListenAddrs(), ","), "--topic", "t", "--partitions", "2"}, "created topic t",
			func(k string, v []byte) error {
				return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte(k), Value: v}).FirstErr()
			})
		cfgs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := cfgs.On("t", nil)
		if err != nil {
			t.Fatal(err)
		}
		compacted := false
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil && *c.Value == "compact" {
				compacted = true
			}
		}
		if !compacted {
			t.Errorf("the topic offrepl created is not compacted: %+v", rc.Configs)
		}
	})
}

// replicaRun starts offrepl replica with the engine flags, waits for the
// line saying it created the bucket or topic, writes through write, waits
// until the map holds the result, and stops it with SIGTERM.
func replicaRun(t *testing.T, ctx context.Context, engine []string, created string, write func(k string, v []byte) error) {
	path := filepath.Join(t.TempDir(), "r.map")
	cmd := reexec.Command(append([]string{"replica", "--map", path, "--entries", "1000", "--avg-key", "8", "--avg-value", "8", "--poll", "50ms", "--progress", "50ms"}, engine...)...)
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
	done := make(chan error, 1)
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	}()
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		done <- cmd.Wait()
	}()
	var stdout []string
	await := func(what string, cond func(line string) bool) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("offrepl exited before %s: %s\nstdout: %q", what, errOut.String(), stdout)
				}
				stdout = append(stdout, l)
				if cond(l) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %s: %s\nstdout: %q", what, errOut.String(), stdout)
			}
		}
	}
	await("line saying the engine's source was created", func(l string) bool { return strings.HasSuffix(l, created) || strings.Contains(l, created+" ") })
	for i := range 10 {
		if err := write(fmt.Sprintf("k%d", i), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := write("k3", nil); err != nil {
		t.Fatal(err)
	}
	// The map, read as any process on the host reads it.
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for {
		_, err3 := m.Get([]byte("k3"))
		v9, err9 := m.Get([]byte("k9"))
		if errors.Is(err3, offmap.ErrNotFound) && err9 == nil && string(v9) == "v9" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the map did not follow the engine: k3 %v, k9 %q %v; stderr %s", err3, v9, err9, errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	await("a progress line with the 9 keys", func(l string) bool { return strings.Contains(l, " keys 9") && strings.Contains(l, "lag 0") })
	st, err := replica.ReadState(m)
	if err != nil || st.Resyncing {
		t.Fatalf("the map's replica state: %+v, %v", st, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	await("the stopped line", func(l string) bool { return strings.Contains(l, "replica: stopped: applied") })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("offrepl replica after SIGTERM: %v, want exit 0; stderr %s", err, errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("offrepl replica did not exit after SIGTERM")
	}
}
