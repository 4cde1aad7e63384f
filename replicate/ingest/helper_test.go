package ingest

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/internal/kafkaoffset"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The multi-process tests re-execute the test binary as an ingest
// process (helperIngest), which they SIGKILL at random instants, or as a
// writer that dies in the middle of an append (helperTorn).

const helperEnv = "OFFREPL_INGEST_HELPER"

// helperSpec is what a helper process is told, as JSON in helperEnv.
type helperSpec struct {
	Role   string // "ingest" or "torn"
	Dir    string
	Roll   queue.RollCycle
	URLs   string // JetStream
	Stream string
	Seeds  []string // Kafka
	Topic  string
	Stored int // torn: messages stored before the torn one
}

func TestMain(m *testing.M) {
	if s := os.Getenv(helperEnv); s != "" {
		var h helperSpec
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

func (h helperSpec) config() Config {
	cfg := Config{Dir: h.Dir, QueueOptions: queue.Options{Roll: h.Roll}, RetryMin: 20 * time.Millisecond, RetryMax: 500 * time.Millisecond}
	if h.Stream != "" {
		cfg.JetStream = &JetStream{URLs: h.URLs, Stream: h.Stream}
	} else {
		cfg.Kafka = &Kafka{Seeds: h.Seeds, Topic: h.Topic}
	}
	return cfg
}

func runHelper(h helperSpec) int {
	switch h.Role {
	case "ingest": // prints "ready" once New succeeded, runs until SIGTERM
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		in, err := New(h.config())
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		fmt.Println("ready")
		err = in.Run(ctx)
		if cerr := in.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		return 0
	case "torn": // appends h.Stored messages, then dies holding a half-written one
		q, err := queue.Open(h.Dir, queue.Options{Roll: h.Roll})
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		tag := SourceTag(jetStreamName(h.Stream))
		for seq := 1; seq <= h.Stored; seq++ {
			p := payload(seq)
			msg := make([]byte, FrameSize+len(p))
			putFrame(msg, Frame{Seq: uint64(seq), Source: tag})
			copy(msg[FrameSize:], p)
			if _, err := q.Append(msg); err != nil {
				fmt.Fprintln(os.Stderr, "helper:", err)
				return 1
			}
		}
		p := payload(h.Stored + 1)
		w, err := q.Reserve(FrameSize + len(p))
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		putFrame(w.Bytes(), Frame{Seq: uint64(h.Stored + 1), Source: tag})
		copy(w.Bytes()[FrameSize:], p[:len(p)/2]) // torn: half the payload
		fmt.Println("reserved")
		select {} // until SIGKILL
	}
	fmt.Fprintln(os.Stderr, "helper: unknown role", h.Role)
	return 2
}

// startHelper starts a helper process and waits for its first line
// ("ready", "reserved"). The process is killed at the end of the test if
// still running.
func startHelper(t testing.TB, h helperSpec) *exec.Cmd {
	t.Helper()
	spec, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	cmd := reexec.Command("-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() { // keep the pipe drained
		}
	}()
	select {
	case l, ok := <-line:
		if !ok {
			cmd.Wait()
			t.Fatalf("helper %s exited before starting: %v", h.Role, cmd.ProcessState)
		}
		_ = l
	case <-time.After(60 * time.Second):
		t.Fatalf("helper %s did not start", h.Role)
	}
	return cmd
}

// payload is the test's message i: its number and a filler of a length
// that varies, so that a message read at the wrong place shows.
func payload(i int) []byte {
	p := make([]byte, 8+i%61)
	binary.LittleEndian.PutUint64(p, uint64(i))
	for j := 8; j < len(p); j++ {
		p[j] = byte(i + j)
	}
	return p
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reader tails a queue in this process, as a local consumer does, for the
// whole test, and checks every message as it comes: framed, from the
// expected source, sequences in increasing order (contiguous when
// contiguous is set).
type reader struct {
	first      int64 // sequence of the first message expected
	contiguous bool
	tag        uint32

	n      atomic.Int64
	mu     sync.Mutex
	seqs   []uint64
	msgs   [][]byte
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

func startReader(t testing.TB, q *queue.Queue, tag uint32, first int64, contiguous bool) *reader {
	t.Helper()
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &reader{first: first, contiguous: contiguous, tag: tag, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer tl.Close()
		next := first
		for tl.Wait(ctx, queue.Block) == nil {
			for {
				idx, msg, err := tl.Next()
				if errors.Is(err, queue.ErrNoMessage) {
					break
				}
				if err == nil {
					var f Frame
					f, msg, err = Split(msg)
					switch {
					case err != nil:
					case f.Source != tag:
						err = fmt.Errorf("source tag %#x, want %#x", f.Source, tag)
					case r.contiguous && int64(f.Seq) != next, int64(f.Seq) < next:
						err = fmt.Errorf("sequence %d after %d", f.Seq, next-1)
					}
					if err == nil {
						next = int64(f.Seq) + 1
						r.mu.Lock()
						r.seqs = append(r.seqs, f.Seq)
						r.msgs = append(r.msgs, append([]byte(nil), msg...))
						r.mu.Unlock()
						r.n.Add(1)
						continue
					}
					err = fmt.Errorf("message %#x: %w", idx, err)
				}
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				return
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *reader) stop() {
	r.cancel()
	<-r.done
}

func (r *reader) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// waitCount waits until the reader has n messages, failing the test at
// once if it met an error.
func (r *reader) waitCount(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("the local tailer to read %d messages", n), func() bool {
		if err := r.failed(); err != nil {
			t.Fatalf("local tailer: %v", err)
		}
		return r.n.Load() >= int64(n)
	})
}

// natsCluster starts a JetStream cluster of n nodes for the test and a
// client connection to it.
func natsCluster(t testing.TB, n int) (*enginetest.NATSCluster, jetstream.JetStream) {
	t.Helper()
	c, _, js := enginetest.NATSForTest(t, n)
	return c, js
}

func createStream(t testing.TB, js jetstream.JetStream, name string, replicas int) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{strings.ToLower(name) + ".>"},
			Replicas: replicas, Storage: jetstream.FileStorage,
		})
		if err == nil {
			return s
		}
		// Right after the cluster starts, the meta leader may not know
		// every peer yet: "no suitable peers for placement".
		if ctx.Err() != nil {
			t.Fatalf("creating stream %s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publishAsync publishes messages [from, to) on subject in windows of
// asynchronous publishes, returning the first failure.
func publishAsync(ctx context.Context, js jetstream.JetStream, subject string, from, to int) error {
	for i := from; i < to; {
		end := min(i+256, to)
		futures := make([]jetstream.PubAckFuture, 0, end-i)
		for ; i < end; i++ {
			f, err := js.PublishAsync(subject, payload(i))
			if err != nil {
				return fmt.Errorf("publishing %d: %w", i, err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("publishing: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// publishRetry publishes messages [from, to) in windows of asynchronous
// publishes, and publishes a window again until the stream acknowledged
// all of it: through a node or a whole cluster restarting. The message
// IDs make the stream drop what a failed window had stored already.
func publishRetry(ctx context.Context, js jetstream.JetStream, subject string, from, to int) error {
	for i := from; i < to; {
		end := min(i+100, to)
		err := func() error {
			futures := make([]jetstream.PubAckFuture, 0, end-i)
			for j := i; j < end; j++ {
				f, err := js.PublishAsync(subject, payload(j), jetstream.WithMsgID(fmt.Sprint(j)))
				if err != nil {
					return err
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}()
		if err == nil {
			i = end
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publishing %d..%d: %w", i, end-1, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// readStream reads the whole stream back in order: the sequences and
// payloads the queue must hold.
func readStream(t testing.TB, js jetstream.JetStream, stream string) ([]uint64, [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	var seqs []uint64
	var msgs [][]byte
	for uint64(len(seqs)) < st.Msgs {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("reading the stream back: %v", err)
		}
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, md.Sequence.Stream)
		msgs = append(msgs, append([]byte(nil), m.Data()...))
	}
	return seqs, msgs
}

// readPartition reads a Kafka partition back from its start to its end.
func readPartition(t testing.TB, seeds []string, topic string) ([]uint64, [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	k := &kafkaSource{cfg: Kafka{Topic: topic}}
	first, last, err := func() (int64, int64, error) {
		defer admin.Close()
		f, err := k.listOffset(ctx, admin, kafkaoffset.Earliest)
		if err != nil {
			return 0, 0, err
		}
		e, err := k.listOffset(ctx, admin, kafkaoffset.Latest)
		return f, e - 1, err
	}()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(first)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var seqs []uint64
	var msgs [][]byte
	for len(seqs) == 0 || int64(seqs[len(seqs)-1]) < last {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("reading the partition back: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seqs = append(seqs, uint64(r.Offset))
			msgs = append(msgs, append([]byte(nil), r.Value...))
		})
	}
	return seqs, msgs
}

// sameAsEngine checks that the local tailer read exactly the engine's
// messages: the same sequences, in the same order, with the same
// payloads.
func (r *reader) sameAsEngine(t testing.TB, seqs []uint64, msgs [][]byte) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seqs) != len(seqs) {
		t.Fatalf("the queue holds %d messages, the engine %d", len(r.seqs), len(seqs))
	}
	for i := range seqs {
		if r.seqs[i] != seqs[i] {
			t.Fatalf("message %d: sequence %d in the queue, %d in the engine", i, r.seqs[i], seqs[i])
		}
		if string(r.msgs[i]) != string(msgs[i]) {
			t.Fatalf("sequence %d: payload %x in the queue, %x in the engine", seqs[i], r.msgs[i], msgs[i])
		}
	}
}
