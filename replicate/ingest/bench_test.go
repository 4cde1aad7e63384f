package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/bench/latency"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/mirror"
	"github.com/twmb/franz-go/pkg/kgo"
)

// End-to-end latency through a 3-node JetStream cluster on loopback, at a
// fixed rate, corrected for coordinated omission (bench/latency: each
// message is stamped with its scheduled send time, and latency counts
// from there, so a stall is charged to every message it delayed).
//
//	engine: publish (PublishAsync) -> R3 stream -> ordered consumer in
//	        this process. The engine's own publish-to-consume latency.
//	direct: append to queue A -> a tailer of A publishes each message
//	        (the mirror's hop, done directly) -> R3 stream -> an ingest
//	        process appends to queue B -> a tailer of B in this process,
//	        woken across processes by the queue's doorbell.
//	mirror: the same with replicate/mirror (its de-duplication headers,
//	        expected sequences and acknowledged named tailer) as host A's
//	        hop, in this process.
//
// Host A and host B are one machine here: the clock that stamps and the
// clock that reads are one (latency.Nanotime). Everything shares the 2
// cores: the three servers, the harness, the tailers, the ingest process.
//
//	go test -run '^$' -bench EndToEnd -benchtime 1x ./ingest
//	go test -run '^$' -bench EndToEnd/mirror -benchtime 1x ./ingest -ingest.rate 10000

var (
	benchRate    = flag.Float64("ingest.rate", 2000, "messages per second of BenchmarkEndToEnd")
	benchSize    = flag.Int("ingest.size", 128, "payload bytes of BenchmarkEndToEnd (at least 8)")
	benchRuns    = flag.Int("ingest.runs", 5, "runs of BenchmarkEndToEnd")
	benchRunTime = flag.Duration("ingest.run", 10*time.Second, "length of each run of BenchmarkEndToEnd")
	benchWarmup  = flag.Duration("ingest.warmup", 5*time.Second, "warm-up of BenchmarkEndToEnd")
	benchJSON    = flag.String("ingest.json", "", "save each BenchmarkEndToEnd result as JSON to `PREFIX`-NAME.json")
)

func BenchmarkEndToEnd(b *testing.B) {
	for _, path := range []string{"engine", "direct", "mirror"} {
		b.Run(path, func(b *testing.B) { benchEndToEnd(b, path) })
	}
}

func benchEndToEnd(b *testing.B, name string) {
	if *benchSize < 8 {
		b.Fatal("-ingest.size: at least 8 bytes, for the send time")
	}
	viaQueues := name != "engine"
	c, js := natsCluster(b, 3)
	createStream(b, js, "BENCH", 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	h, err := latency.New(latency.Options{
		Name: name, Throughput: *benchRate,
		WarmupDuration: *benchWarmup, Runs: *benchRuns, RunDuration: *benchRunTime,
		Out: os.Stdout, DrainTimeout: 30 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	e2e := h.EndToEnd()
	var failed atomic.Pointer[error]
	fail := func(err error) {
		if failed.CompareAndSwap(nil, &err) {
			cancel()
		}
	}
	// Every publish, direct or from queue A, is asynchronous: the
	// publisher does not wait for the stream's acknowledgement (the
	// mirror would not either, within a window), but one that fails
	// fails the benchmark.
	pjs, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(1000), jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) { fail(err) }))
	if err != nil {
		b.Fatal(err)
	}
	// A full window (1,000 unacknowledged) makes the publisher wait, as
	// a mirror would: the latency shows it.
	pub := func(msg []byte) {
		if _, err := pjs.PublishAsync("bench.x", msg, jetstream.WithStallWait(time.Minute)); err != nil {
			fail(err)
		}
	}
	// record takes a message's send time from its first 8 bytes.
	record := func(payload []byte) {
		e2e.Record(latency.Nanotime() - int64(binary.LittleEndian.Uint64(payload)))
	}
	msg := make([]byte, *benchSize)
	var task func(start int64)
	var readers []func() // run until ctx is done
	ingestPid := 0

	if !viaQueues {
		cons, err := js.OrderedConsumer(ctx, "BENCH", jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			b.Fatal(err)
		}
		it, err := cons.Messages()
		if err != nil {
			b.Fatal(err)
		}
		defer it.Stop()
		readers = append(readers, func() {
			for {
				m, err := it.Next(jetstream.NextContext(ctx))
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				record(m.Data())
			}
		})
		task = func(start int64) {
			binary.LittleEndian.PutUint64(msg, uint64(start))
			pub(msg)
		}
	} else {
		dir := b.TempDir()
		qa, err := queue.Open(filepath.Join(dir, "a"), queue.Options{BlockSize: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer qa.Close()
		if err := qa.Prepare(); err != nil {
			b.Fatal(err)
		}
		qb, err := queue.Open(filepath.Join(dir, "b"), queue.Options{BlockSize: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer qb.Close()
		ing := startHelper(b, helperSpec{Role: "ingest", Dir: qb.Dir(), URLs: c.URLs(), Stream: "BENCH"})
		ingestPid = ing.Process.Pid
		defer func() {
			ing.Process.Signal(syscall.SIGTERM)
			if err := ing.Wait(); err != nil {
				b.Errorf("ingest process: %v", err)
			}
		}()
		ta, err := qa.Tailer()
		if err != nil {
			b.Fatal(err)
		}
		defer ta.Close()
		tb, err := qb.Tailer()
		if err != nil {
			b.Fatal(err)
		}
		defer tb.Close()
		drain := func(t *queue.Tailer, each func([]byte)) func() {
			return func() {
				for t.Wait(ctx, queue.Block) == nil {
					if _, err := t.Drain(0, func(_ uint64, m []byte) bool { each(m); return true }); err != nil {
						fail(err)
						return
					}
				}
			}
		}
		if name == "mirror" {
			mir, err := mirror.NewJetStream(mirror.Config{Queue: qa, SourceID: "bench/a", OnError: fail},
				mirror.JetStream{Conn: js.Conn(), Stream: "BENCH", Subject: "bench.x"})
			if err != nil {
				b.Fatal(err)
			}
			readers = append(readers, func() {
				if err := mir.Run(ctx); err != nil {
					fail(err)
				}
			})
		} else {
			// scheduled start to PublishAsync by A's tailer
			hop := h.Probe("A: to publish")
			readers = append(readers, drain(ta, func(m []byte) { // host A's hop
				hop.Record(latency.Nanotime() - int64(binary.LittleEndian.Uint64(m)))
				pub(m)
			}))
		}
		readers = append(readers,
			drain(tb, func(m []byte) { // host B's reader
				_, p, err := Split(m)
				if err != nil {
					fail(err)
					return
				}
				record(p)
			}))
		task = func(start int64) {
			binary.LittleEndian.PutUint64(msg, uint64(start))
			if _, err := qa.Append(msg); err != nil {
				fail(err)
			}
		}
	}
	done := make(chan struct{}, len(readers))
	for _, r := range readers {
		go func() { r(); done <- struct{}{} }()
	}
	defer func() {
		cancel()
		for range readers {
			<-done
		}
	}()

	// CPU: this process (the three servers, the harness, the tailers) and
	// the ingest process, over the whole measurement.
	var pids []int
	if ingestPid != 0 {
		pids = append(pids, ingestPid)
	}
	cpu, err := latency.StartCPU(pids...)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	res, err := h.Run(ctx, task)
	b.StopTimer()
	if u, cerr := cpu.Read(); cerr == nil {
		b.ReportMetric(float64(u.SelfNanos)*100/float64(u.WallNanos), "bench-process-cpu-%")
		if ingestPid != 0 {
			b.ReportMetric(float64(u.ListedNanos)*100/float64(u.WallNanos), "ingest-process-cpu-%")
		}
	}
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	if err != nil && !errors.Is(err, latency.ErrMissingSamples) {
		b.Fatal(err)
	}
	if err != nil {
		b.Error(err)
	}
	if *benchJSON != "" {
		if err := res.SaveJSON(*benchJSON + "-" + name + ".json"); err != nil {
			b.Error(err)
		}
	}
	// The median over the runs (the first left out, as it still carries
	// warm-up effects) of each percentile.
	for _, pc := range []struct {
		p    float64
		name string
	}{{50, "p50"}, {99, "p99"}, {99.9, "p99.9"}, {100, "worst"}} {
		var v []int64
		for i, run := range res.Runs {
			if i == 0 && len(res.Runs) >= 3 {
				continue
			}
			st, _ := run.Probe(latency.EndToEndName)
			if ns, ok := st.At(pc.p); ok {
				v = append(v, ns)
			}
		}
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		b.ReportMetric(float64(v[len(v)/2])/1e3, pc.name+"-us")
	}
	b.ReportMetric(*benchRate, "msg/s")
	fmt.Println()
}

// BenchmarkCatchUp measures how fast an ingest copies a backlog: b.N
// messages of -ingest.size bytes already in an R3 stream of a 3-node
// cluster (or a kfake partition), from New to the last one stored.
//
//	go test -run '^$' -bench CatchUp -benchtime 200000x ./ingest
func BenchmarkCatchUp(b *testing.B) {
	b.Run("jetstream", func(b *testing.B) {
		c, js := natsCluster(b, 3)
		createStream(b, js, "BACKLOG", 3)
		msg := make([]byte, *benchSize)
		for i := 0; i < b.N; {
			end := min(i+1000, b.N)
			for ; i < end; i++ {
				if _, err := js.PublishAsync("backlog.x", msg); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publishing the backlog timed out")
			}
		}
		benchCatchUp(b, Config{JetStream: &JetStream{URLs: c.URLs(), Stream: "BACKLOG"}}, int64(b.N))
	})
	b.Run("kafka", func(b *testing.B) {
		c := kafkaCluster(b, 3, "backlog")
		cl := producer(b, c.ListenAddrs())
		msg := make([]byte, *benchSize)
		for i := 0; i < b.N; {
			end := min(i+1000, b.N)
			recs := make([]*kgo.Record, 0, end-i)
			for ; i < end; i++ {
				recs = append(recs, &kgo.Record{Topic: "backlog", Value: msg})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
		benchCatchUp(b, Config{Kafka: &Kafka{Seeds: c.ListenAddrs(), Topic: "backlog"}}, int64(b.N-1))
	})
}

func benchCatchUp(b *testing.B, cfg Config, last int64) {
	cfg.Dir = filepath.Join(b.TempDir(), "q")
	cfg.QueueOptions.BlockSize = 4 << 20
	b.ResetTimer()
	in, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- in.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Minute)
	for in.Progress().Stored != last {
		if time.Now().After(deadline) {
			b.Fatalf("catching up: %v", in.Progress())
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
