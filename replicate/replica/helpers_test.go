package replica_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The helper process: a replica on one "host" (its own map file), run by
// the multi-process tests as this test binary with the environment
// variables below. It prints "READY" once its replica is open, "WRITES
// DONE" once its writes through the engine are acknowledged, and runs
// until SIGTERM (exit 0) or SIGKILL.
const (
	envHelper = "REPLICA_TEST_HELPER" // engine: "jetstream" or "kafka"
	envURLs   = "REPLICA_TEST_URLS"   // NATS URLs or Kafka seeds
	envSource = "REPLICA_TEST_SOURCE" // bucket or topic
	envMap    = "REPLICA_TEST_MAP"
	envWrites = "REPLICA_TEST_WRITES" // operations to write through the engine
	envKeys   = "REPLICA_TEST_KEYS"   // the key space of the writes
	envID     = "REPLICA_TEST_ID"
)

func TestMain(m *testing.M) {
	if engine := os.Getenv(envHelper); engine != "" {
		os.Exit(helper(engine))
	}
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// mapOptions sizes every map of the tests.
var mapOptions = offmap.Options{Entries: 4096, AverageKeySize: 16, AverageValueSize: 32}

func helper(engine string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	writes, _ := strconv.Atoi(os.Getenv(envWrites))
	keys, _ := strconv.Atoi(os.Getenv(envKeys))
	id := os.Getenv(envID)
	cfg := replica.Config{PollInterval: 100 * time.Millisecond, MaxBackoff: time.Second}
	var r *replica.Replica
	var err error
	switch engine {
	case "jetstream":
		nc, err := nats.Connect(os.Getenv(envURLs), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		r, err = replica.OpenJetStream(os.Getenv(envMap), mapOptions, js, os.Getenv(envSource), cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
	case "kafka":
		r, err = replica.OpenKafka(os.Getenv(envMap), mapOptions, os.Getenv(envSource), cfg, kgo.SeedBrokers(strings.Split(os.Getenv(envURLs), ",")...))
	default:
		err = fmt.Errorf("no engine %q", engine)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Println("READY")
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	if writes > 0 {
		if err := randomWrites(ctx, r, engine == "jetstream", id, writes, keys); err != nil {
			fmt.Fprintln(os.Stderr, "helper: writes:", err)
			return 1
		}
		fmt.Println("WRITES DONE")
	}
	if err := <-runErr; err != nil {
		fmt.Fprintln(os.Stderr, "helper: run:", err)
		return 1
	}
	if err := r.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "helper: close:", err)
		return 1
	}
	return 0
}

// randomWrites makes n writes through r on keys k0..k(keys-1): puts,
// deletes and, on JetStream, compare-and-set updates. Each write is
// tried again until the engine acknowledges it (an engine node may be
// down meanwhile).
func randomWrites(ctx context.Context, r *replica.Replica, cas bool, id string, n, keys int) error {
	rng := rand.New(rand.NewPCG(uint64(len(id)), uint64(time.Now().UnixNano())))
	for i := range n {
		key := []byte("k" + strconv.Itoa(rng.IntN(keys)))
		value := []byte(fmt.Sprintf("%s-%d", id, i))
		op := rng.IntN(10)
		for attempt := 0; ; attempt++ {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			switch {
			case op < 2:
				err = r.Delete(wctx, key)
			case op < 4 && cas:
				// From the local value: a compare-and-set that may lose.
				if old, gerr := r.Get(key); gerr == nil {
					_, err = r.CompareAndSwap(wctx, key, old, value)
				} else if _, err = r.Update(wctx, key, value, 0); errors.Is(err, replica.ErrConflict) {
					err = nil
				}
			default:
				err = r.Put(wctx, key, value)
			}
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if attempt == 100 {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// proc is a helper process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  chan string // its stdout lines
	done chan error  // its exit
	err  *strings.Builder
}

func startHelper(t *testing.T, name, engine, urls, source, mapPath string, writes, keys int) *proc {
	t.Helper()
	cmd := reexec.Command("-test.run=^$")
	cmd.Env = append(os.Environ(),
		envHelper+"="+engine, envURLs+"="+urls, envSource+"="+source, envMap+"="+mapPath,
		envWrites+"="+strconv.Itoa(writes), envKeys+"="+strconv.Itoa(keys), envID+"="+name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, cmd: cmd, out: make(chan string, 16), done: make(chan error, 1), err: &strings.Builder{}}
	cmd.Stderr = p.err
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.out <- sc.Text()
		}
		close(p.out)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// await waits for a line on the helper's stdout.
func (p *proc) await(line string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.out:
			if !ok {
				p.t.Fatalf("%s exited before %q: %v", p.name, line, p.err)
			}
			if l == line {
				return
			}
		case <-deadline:
			p.t.Fatalf("%s did not print %q within %v: %v", p.name, line, timeout, p.err)
		}
	}
}

func (p *proc) kill() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and wants exit status 0.
func (p *proc) stop(timeout time.Duration) {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("%s: %v after SIGTERM, want exit 0: %s", p.name, err, p.err)
		}
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		p.t.Errorf("%s did not exit within %v of SIGTERM", p.name, timeout)
	}
}

// waitFor polls cond until it holds or the deadline passes; cond says
// what it last saw.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, timeout, saw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startNATS starts an embedded JetStream cluster of n nodes.
func startNATS(t *testing.T, n int) (*enginetest.NATSCluster, jetstream.JetStream) {
	t.Helper()
	c, _, js := enginetest.NATSForTest(t, n)
	return c, js
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// bucketState reads every live key and value of a bucket from the
// engine, as of the stream leader's last sequence at the call at least.
// (A watch's consumer may live on a replica of the stream that lags
// behind the leader: its first values may be out of date, so the watch
// goes on until it has delivered the leader's last change.)
func bucketState(t *testing.T, ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) map[string]string {
	t.Helper()
	stream := "KV_" + kv.Bucket()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	state := map[string]string{}
	var seen uint64
	initial := true
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				t.Fatal("the watch ended")
			}
			if e == nil {
				initial = false
				break
			}
			seen = max(seen, e.Revision())
			if e.Operation() == jetstream.KeyValuePut {
				state[e.Key()] = string(e.Value())
			} else {
				delete(state, e.Key())
			}
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("reading bucket %s: %v", kv.Bucket(), ctx.Err())
		}
		if !initial && (seen >= last || !leaderHasAfter(t, ctx, js, stream, seen, last)) {
			return state
		}
	}
}

// leaderHasAfter asks the stream leader whether it holds a message after
// seq, up to last.
func leaderHasAfter(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string, seq, last uint64) bool {
	t.Helper()
	msg, err := js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, []byte(fmt.Sprintf(`{"seq":%d,"next_by_subj":">"}`, seq+1)))
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Message != nil && resp.Message.Seq <= last
}

// topicState reads a topic from its start to its end and folds it into
// the state a compacted topic stands for.
func topicState(t *testing.T, ctx context.Context, seeds []string, topic string) map[string]string {
	t.Helper()
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	state := map[string]string{}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Value == nil {
				delete(state, string(r.Key))
			} else {
				state[string(r.Key)] = string(r.Value)
			}
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return state
}

// mapState reads every replicated key and value of a map file.
func mapState(t *testing.T, path string) map[string]string {
	t.Helper()
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	state := map[string]string{}
	for k, v := range m.All() {
		if !replica.IsStateKey(k) {
			state[string(k)] = string(v)
		}
	}
	return state
}

// readState reads the replica state of a map file.
func readState(path string) (replica.State, error) {
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		return replica.State{}, err
	}
	defer m.Close()
	return replica.ReadState(m)
}

// diff describes how two states differ ("" if they are equal).
func diff(want, got map[string]string) string {
	var d []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			d = append(d, fmt.Sprintf("%q missing (want %q)", k, v))
		} else if g != v {
			d = append(d, fmt.Sprintf("%q = %q, want %q", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%q = %q, should be absent", k, v))
		}
	}
	sort.Strings(d)
	if len(d) > 10 {
		d = append(d[:10], fmt.Sprintf("... and %d more", len(d)-10))
	}
	return strings.Join(d, "; ")
}

// startKafka starts a kfake cluster.
func startKafka(t *testing.T, brokers int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := enginetest.StartKafka(t.TempDir(), brokers, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func mapPath(t *testing.T, name string) string {
	return filepath.Join(t.TempDir(), name+".map")
}
