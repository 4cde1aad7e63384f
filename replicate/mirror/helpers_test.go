package mirror

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/internal/kafkaoffset"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tests re-execute their binary as helper processes: appenders and
// mirrors, so that a mirror can be killed with SIGKILL at any instant.
// The role and its arguments come in the environment.
const (
	envRole = "MIRROR_TEST_ROLE"
	envArgs = "MIRROR_TEST_ARGS" // role arguments, separated by '|'
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runHelper(role, strings.Split(os.Getenv(envArgs), "|")))
	}
	os.Exit(m.Run())
}

// testQueueOptions makes a queue roll every 100 ms into small cycle files,
// so that the mirror crosses many of them.
var testQueueOptions = queue.Options{Roll: queue.Fast, MaxCycleSize: 16 << 20, BlockSize: 64 << 10}

func runHelper(role string, args []string) int {
	switch role {
	case "append":
		// dir id count rate(messages/s)
		if len(args) != 4 {
			fmt.Fprintln(os.Stderr, "append: want dir id count rate")
			return 2
		}
		id, _ := strconv.ParseUint(args[1], 10, 64)
		count, _ := strconv.Atoi(args[2])
		rate, _ := strconv.Atoi(args[3])
		if err := appendPaced(args[0], id, count, rate); err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			return 1
		}
		return 0
	case "mirror-js", "mirror-kafka":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		cfg := Config{
			Dir: args[0], SourceID: args[1], TailerName: "m",
			Timeout: 5 * time.Second, RetryMin: 20 * time.Millisecond, RetryMax: 500 * time.Millisecond,
			OnError: func(err error) { fmt.Fprintf(os.Stderr, "%s mirror: %v\n", time.Now().Format("15:04:05.000"), err) },
		}
		var m *Mirror
		var err error
		if role == "mirror-js" {
			// dir source urls stream subject
			m, err = NewJetStream(cfg, JetStream{URLs: args[2], Stream: args[3], Subject: args[4]})
		} else {
			// dir source seeds topic partition
			part, _ := strconv.Atoi(args[4])
			m, err = NewKafka(cfg, Kafka{Seeds: strings.Split(args[2], ","), Topic: args[3], Partition: int32(part)})
		}
		if err == nil {
			fmt.Println("running")
			go func() {
				for range time.Tick(time.Second) {
					p := m.Progress()
					fmt.Fprintf(os.Stderr, "%s progress: sent %d acked %d lag %d restarts %d err %v\n", time.Now().Format("15:04:05.000"), p.Sent, p.Acked, p.Lag, p.Restarts, p.Err)
				}
			}()
			t0 := time.Now()
			err = m.Run(ctx)
			defer func() { fmt.Fprintf(os.Stderr, "ran %v\n", time.Since(t0).Round(time.Millisecond)) }()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mirror:", err)
			return 3
		}
		p := m.Progress()
		fmt.Fprintf(os.Stderr, "mirror stopped: sent %d acked %d dups %d restarts %d lag %d\n", p.Sent, p.Acked, p.Duplicates, p.Restarts, p.Lag)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// payload is an appender's message: its id and its sequence number.
func payload(id, seq uint64) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], id)
	binary.LittleEndian.PutUint64(b[8:], seq)
	return b[:]
}

// appendPaced appends count messages of appender id at about rate per
// second, so that the appenders run during the mirrors' lives.
func appendPaced(dir string, id uint64, count, rate int) error {
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		return err
	}
	defer q.Close()
	start := time.Now()
	for seq := range count {
		if _, err := q.Append(payload(id, uint64(seq))); err != nil {
			return fmt.Errorf("append %d: %w", seq, err)
		}
		if rate > 0 && seq%256 == 255 {
			if ahead := time.Duration(seq+1)*time.Second/time.Duration(rate) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	return nil
}

// proc is a helper process.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

func startProc(t *testing.T, role string, args ...string) *proc {
	t.Helper()
	cmd := reexec.Command("-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envArgs+"="+strings.Join(args, "|"))
	p := &proc{name: role, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", role, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// running waits until a mirror process has started its mirror (and
// handles SIGTERM).
func (p *proc) running(t *testing.T) {
	t.Helper()
	waitFor(t, time.Minute, p.name+" to start", func() bool { return strings.Contains(p.out.tail(1<<20), "running\n") })
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// wait waits up to d for the process to exit and fails the test unless
// it exited with status 0.
func (p *proc) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.kill()
		t.Fatalf("%s did not exit within %v; output:\n%s", p.name, d, p.out.tail(4000))
	}
	if p.err != nil {
		t.Fatalf("%s: %v; output:\n%s", p.name, p.err, p.out.tail(4000))
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// waitFor polls cond every 20 ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rec is one message: its queue index and payload.
type rec struct {
	idx  uint64
	data []byte
}

func readQueue(t *testing.T, q *queue.Queue) []rec {
	t.Helper()
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var rs []rec
	for {
		idx, msg, err := tl.Next()
		if errors.Is(err, queue.ErrNoMessage) {
			return rs
		}
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, rec{idx, bytes.Clone(msg)})
	}
}

// readStream reads the whole stream in order; every message must carry
// the source's headers. A read that fails (a cluster still electing
// leaders after a node's restart) starts again, for up to two minutes.
func readStream(t *testing.T, nc *nats.Conn, stream, source string) []rec {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rs, err := tryReadStream(nc, stream, source)
		if err == nil {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("read stream %s: %v", stream, err)
		}
		t.Logf("read stream %s: %v (again)", stream, err)
		time.Sleep(200 * time.Millisecond)
	}
}

func tryReadStream(nc *nats.Conn, stream, source string) ([]rec, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	n := info.State.Msgs
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		InactiveThreshold: time.Minute, MemoryStorage: true, Replicas: 1,
	})
	if err != nil {
		return nil, err
	}
	defer st.DeleteConsumer(context.Background(), cons.CachedInfo().Name)
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	rs := make([]rec, 0, n)
	for uint64(len(rs)) < n {
		m, err := it.Next(jetstream.NextMaxWait(10 * time.Second))
		if err != nil {
			return nil, fmt.Errorf("after %d of %d messages: %w", len(rs), n, err)
		}
		if src := m.Headers().Get(HeaderSource); src != source {
			return nil, fmt.Errorf("message %d has source %q, want %q", len(rs), src, source)
		}
		idx, err := strconv.ParseUint(m.Headers().Get(HeaderIndex), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("message %d: index header: %v", len(rs), err)
		}
		if id := m.Headers().Get(jetstream.MsgIDHeader); id != source+":"+strconv.FormatUint(idx, 10) {
			return nil, fmt.Errorf("message %d has id %q", len(rs), id)
		}
		rs = append(rs, rec{idx, bytes.Clone(m.Data())})
	}
	return rs, nil
}

// readPartition reads the partition's committed records of the source,
// read_committed as a consumer should. Control records are kept so that
// the read knows when it reached the end (the last record is a marker).
func readPartition(t *testing.T, seeds []string, topic string, part int32, source string) []rec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	k := &kafkaEngine{m: &Mirror{cfg: Config{Timeout: time.Minute}}, t: Kafka{Seeds: seeds, Topic: topic, Partition: part}}
	end, err := k.listOffset(ctx, cl, kafkaoffset.Latest)
	if err != nil {
		t.Fatal(err)
	}
	var rs []rec
	for reached := end == 0; !reached; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end-1 {
				reached = true
			}
			if r.Attrs.IsControl() {
				return
			}
			var src, index string
			for _, h := range r.Headers {
				switch h.Key {
				case HeaderSource:
					src = string(h.Value)
				case HeaderIndex:
					index = string(h.Value)
				}
			}
			if src != source {
				return
			}
			idx, err := strconv.ParseUint(index, 10, 64)
			if err != nil {
				t.Errorf("record at %d: index header %q", r.Offset, index)
				return
			}
			rs = append(rs, rec{idx, bytes.Clone(r.Value)})
		})
	}
	return rs
}

// compare checks that the engine holds exactly the queue's messages, in
// the queue's order, and that the queue holds every appender's messages
// in sequence.
func compare(t *testing.T, q, e []rec, appenders, perAppender int) {
	t.Helper()
	if len(q) != appenders*perAppender {
		t.Fatalf("queue holds %d messages, want %d", len(q), appenders*perAppender)
	}
	next := make([]uint64, appenders)
	for i, r := range q {
		id := binary.LittleEndian.Uint64(r.data)
		seq := binary.LittleEndian.Uint64(r.data[8:])
		if id >= uint64(appenders) || seq != next[id] {
			t.Fatalf("queue message %d (index %#x) is appender %d's %d, want its %d", i, r.idx, id, seq, next[id])
		}
		next[id]++
	}
	sameRecs(t, q, e)
}

// sameRecs checks that the engine holds the messages q (e), in order.
func sameRecs(t *testing.T, q, e []rec) {
	t.Helper()
	for i := 0; i < len(q) && i < len(e); i++ {
		if q[i].idx != e[i].idx || !bytes.Equal(q[i].data, e[i].data) {
			prev := "none"
			if i > 0 {
				prev = fmt.Sprintf("%#x", e[i-1].idx)
			}
			t.Fatalf("engine message %d is index %#x (the one before: %s), queue message %d is index %#x; payloads equal: %v",
				i, e[i].idx, prev, i, q[i].idx, bytes.Equal(q[i].data, e[i].data))
		}
	}
	if len(e) != len(q) {
		t.Fatalf("engine holds %d messages, queue %d", len(e), len(q))
	}
}

// serverLogger keeps the warnings and errors of embedded servers.
type serverLogger struct{ syncBuffer }

type nodeLogger struct {
	l *serverLogger
	n int
}

func (l *serverLogger) node(i int) *nodeLogger { return &nodeLogger{l, i + 1} }

func (l *nodeLogger) log(level, format string, v []any) {
	fmt.Fprintf(&l.l.syncBuffer, "%s n%d %s %s\n", time.Now().Format("15:04:05.000"), l.n, level, fmt.Sprintf(format, v...))
}
func (l *nodeLogger) Noticef(string, ...any)         {}
func (l *nodeLogger) Debugf(string, ...any)          {}
func (l *nodeLogger) Tracef(string, ...any)          {}
func (l *nodeLogger) Warnf(format string, v ...any)  { l.log("WRN", format, v) }
func (l *nodeLogger) Errorf(format string, v ...any) { l.log("ERR", format, v) }
func (l *nodeLogger) Fatalf(format string, v ...any) { l.log("FTL", format, v) }
