package mirror

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkMirror measures the mirror's throughput against publishing the
// same messages straight to the engine with the same client library and
// the same window of messages in flight: an op is one message. "direct"
// publishes the messages as the mirror stores them, headers included
// (JetStream: Nats-Msg-Id, Offmap-Source, Offmap-Index; Kafka:
// Offmap-Source, Offmap-Index, to the same single partition); "bare"
// publishes the payloads alone. The messages go in rounds, each round
// measuring the three in turn, in an order that rotates, so that they see
// the same load of a shared machine. The mirror runs throughout: its part
// of a round commits messages written beforehand into reserved slots of
// the queue, and waits for the engine's acknowledgement of the last.
//
// Reported: the three rates; "mirror/direct" and "mirror/bare", the
// ratios of the times (1.10 is 10 % slower); "cpu-mirror/direct", the
// ratio of the process's CPU time (the engine runs in the process) spent
// per message, which the machine's other load disturbs less than the
// times. JetStream: one embedded server, file storage. Kafka: kfake, one
// broker; the mirror produces in transactions, direct and bare with the
// library's default idempotent producer.
//
//	go test -run '^$' -bench Mirror -benchtime 200000x -count 5 ./mirror
func BenchmarkMirror(b *testing.B) {
	for _, engine := range []string{"jetstream", "kafka"} {
		for _, size := range []int{16, 256} {
			b.Run(fmt.Sprintf("%s/%dB", engine, size), func(b *testing.B) {
				benchMirror(b, engine, size)
			})
		}
	}
}

const (
	benchWindow = 8192
	benchRounds = 9
	benchSource = "bench"
)

type benchTarget struct {
	// direct publishes the messages; with indexes, with the headers the
	// mirror gives them.
	direct func(b *testing.B, payloads [][]byte, indexes []uint64)
	mirror func(cfg Config) (*Mirror, error)
}

func benchMirror(b *testing.B, engine string, size int) {
	var t benchTarget
	switch engine {
	case "jetstream":
		t = benchJetStream(b)
	case "kafka":
		t = benchKafka(b)
	}
	q, err := queue.Open(b.TempDir(), queue.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	per := max(b.N/benchRounds, 1)
	payloads := make([][]byte, per)
	for i := range payloads {
		payloads[i] = make([]byte, size)
		copy(payloads[i], fmt.Sprint(i))
	}
	m, err := t.mirror(Config{Queue: q, SourceID: benchSource, MaxInFlight: benchWindow})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			b.Error(err)
		}
	}()
	// A first message opens the mirror's session.
	if _, err := q.Append(payloads[0]); err != nil {
		b.Fatal(err)
	}
	acked := uint64(1)
	for m.Progress().Acked < acked {
		time.Sleep(time.Millisecond)
	}
	// A mirrored round's messages are written beforehand, in reserved
	// slots that readers wait at, and committed when the round starts:
	// what is measured is the mirror, not the appends. The direct
	// round publishes them with the same indexes.
	writings := make([]queue.Writing, len(payloads))
	indexes := make([]uint64, len(payloads))
	prepare := func() {
		for i, p := range payloads {
			if writings[i], err = q.Reserve(len(p)); err != nil {
				b.Fatal(err)
			}
			copy(writings[i].Bytes(), p)
			indexes[i] = writings[i].Index()
		}
	}
	mirrorRound := func() {
		acked += uint64(len(payloads))
		for i := range writings {
			if _, err := writings[i].Commit(); err != nil {
				b.Fatal(err)
			}
		}
		for m.acked.Load() < acked { // not Progress, which reads the queue
			time.Sleep(50 * time.Microsecond)
		}
	}
	var d, c [3]time.Duration // mirror, direct, bare
	phases := [3]func(){
		mirrorRound,
		func() { t.direct(b, payloads, indexes) },
		func() { t.direct(b, payloads, nil) },
	}
	b.ResetTimer()
	for r := range benchRounds {
		b.StopTimer()
		prepare()
		b.StartTimer()
		for i := range 3 {
			ph := (r + i) % 3
			c0, t0 := cpuTime(), time.Now()
			phases[ph]()
			d[ph] += time.Since(t0)
			c[ph] += cpuTime() - c0
		}
	}
	b.StopTimer()
	if p := m.Progress(); p.Restarts != 0 {
		b.Fatalf("the mirror restarted sessions: %+v", p)
	}
	n := float64(benchRounds * per)
	b.ReportMetric(n/d[0].Seconds(), "mirror-msg/s")
	b.ReportMetric(n/d[1].Seconds(), "direct-msg/s")
	b.ReportMetric(n/d[2].Seconds(), "bare-msg/s")
	b.ReportMetric(d[0].Seconds()/d[1].Seconds(), "mirror/direct")
	b.ReportMetric(d[0].Seconds()/d[2].Seconds(), "mirror/bare")
	b.ReportMetric(c[0].Seconds()/c[1].Seconds(), "cpu-mirror/direct")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchJetStream(b *testing.B) benchTarget {
	c, err := enginetest.StartNATS(b.TempDir(), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Shutdown)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(benchWindow))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"DIRECT", "BARE", "MIRROR"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.FileStorage}); err != nil {
			b.Fatal(err)
		}
	}
	wait := jetstream.WithStallWait(time.Minute)
	return benchTarget{
		direct: func(b *testing.B, payloads [][]byte, indexes []uint64) {
			for i, p := range payloads {
				var err error
				if indexes == nil {
					_, err = js.PublishAsync("BARE", p, wait)
				} else {
					idx := strconv.FormatUint(indexes[i], 10)
					_, err = js.PublishMsgAsync(&nats.Msg{Subject: "DIRECT", Data: p, Header: nats.Header{
						jetstream.MsgIDHeader: {benchSource + ":" + idx}, HeaderSource: {benchSource}, HeaderIndex: {idx},
					}}, wait)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
		},
		mirror: func(cfg Config) (*Mirror, error) {
			return NewJetStream(cfg, JetStream{Conn: nc, Stream: "MIRROR", Subject: "MIRROR"})
		},
	}
}

func benchKafka(b *testing.B) benchTarget {
	c, err := enginetest.StartKafka("", 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	for _, topic := range []string{"direct", "bare", "mirror"} {
		if err := c.CreateTopic(topic, 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxBufferedRecords(benchWindow))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	source := []byte(benchSource)
	return benchTarget{
		direct: func(b *testing.B, payloads [][]byte, indexes []uint64) {
			var failed error
			promise := func(_ *kgo.Record, err error) {
				if err != nil {
					failed = err
				}
			}
			for i, p := range payloads {
				r := &kgo.Record{Topic: "bare", Value: p}
				if indexes != nil {
					r.Topic = "direct"
					r.Headers = []kgo.RecordHeader{{Key: HeaderSource, Value: source}, {Key: HeaderIndex, Value: strconv.AppendUint(nil, indexes[i], 10)}}
				}
				cl.Produce(context.Background(), r, promise)
			}
			if err := cl.Flush(context.Background()); err != nil || failed != nil {
				b.Fatal(err, failed)
			}
		},
		mirror: func(cfg Config) (*Mirror, error) {
			return NewKafka(cfg, Kafka{Seeds: c.ListenAddrs(), Topic: "mirror"})
		},
	}
}
