package ingest

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func kafkaCluster(t testing.TB, brokers int, topic string) *kfake.Cluster {
	t.Helper()
	c, err := enginetest.StartKafka("", brokers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// produce sends messages [from, to) to partition 0 of topic, in batches,
// in order (one idempotent producer).
func produce(ctx context.Context, cl *kgo.Client, topic string, from, to int) error {
	for i := from; i < to; {
		end := min(i+500, to)
		recs := make([]*kgo.Record, 0, end-i)
		for ; i < end; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: payload(i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

func producer(t testing.TB, seeds []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKafkaKillResume: as TestJetStreamKillResume, with a partition of a
// 3-broker kfake cluster.
func TestKafkaKillResume(t *testing.T) {
	total, kills := killTestSize()
	c := kafkaCluster(t, 3, "orders")
	seeds := c.ListenAddrs()
	cl := producer(t, seeds)
	spec := helperSpec{Role: "ingest", Dir: filepath.Join(t.TempDir(), "q"), Roll: queue.Secondly, Seeds: seeds, Topic: "orders"}
	r := killAndResume(t, spec, SourceTag(kafkaName("orders", 0)), 0, total, kills, func(ctx context.Context, published *atomic.Int64) error {
		for i := 0; i < total; {
			n := min(total-i, 1+rand.N(total/8))
			if err := produce(ctx, cl, "orders", i, i+n); err != nil {
				return err
			}
			i += n
			published.Store(int64(i))
			time.Sleep(time.Duration(rand.N(200)) * time.Millisecond)
		}
		return nil
	})
	seqs, msgs := readPartition(t, seeds, "orders")
	if len(seqs) != total || seqs[0] != 0 || seqs[len(seqs)-1] != uint64(total-1) {
		t.Fatalf("the partition holds %d records, want %d from offset 0", len(seqs), total)
	}
	r.sameAsEngine(t, seqs, msgs)
}

// TestKafkaGap: records deleted from the partition before the ingest
// stored them give ErrGap.
func TestKafkaGap(t *testing.T) {
	c := kafkaCluster(t, 1, "g")
	seeds := c.ListenAddrs()
	cl := producer(t, seeds)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := produce(ctx, cl, "g", 0, 5); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dir: filepath.Join(t.TempDir(), "q"), Kafka: &Kafka{Seeds: seeds, Topic: "g"}, RetryMin: 10 * time.Millisecond}
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- in.Run(runCtx) }()
	waitFor(t, time.Minute, "5 records stored", func() bool { return in.Progress().Stored == 4 })
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	in.Close()

	if err := produce(ctx, cl, "g", 5, 10); err != nil {
		t.Fatal(err)
	}
	// DeleteRecords up to offset 8: 5, 6 and 7 are gone.
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := deleteRecords(ctx, adm, "g", 8); err != nil {
		t.Fatal(err)
	}
	in, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := in.Run(ctx); !errors.Is(err, ErrGap) {
		t.Fatalf("Run after DeleteRecords: %v, want ErrGap", err)
	}
}

// deleteRecords moves the log start offset of partition 0 of topic to
// before.
func deleteRecords(ctx context.Context, cl *kgo.Client, topic string, before int64) error {
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition = 0
	rp.Offset = before
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestKafkaEngineRestart: the broker stops while an ingest runs: the
// ingest reports the error and keeps trying, a local tailer reads what
// was stored, and once the broker is back (same port, same data) the
// ingest catches up.
func TestKafkaEngineRestart(t *testing.T) {
	const batch = 500
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := t.TempDir()
	start := func() *kfake.Cluster {
		t.Helper()
		c, err := enginetest.StartKafka(data, 1, kfake.Ports(port))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	defer func() { c.Close() }()
	if err := c.CreateTopic("events", 1, nil); err != nil {
		t.Fatal(err)
	}
	seeds := c.ListenAddrs()
	cl := producer(t, seeds)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := produce(ctx, cl, "events", 0, batch); err != nil {
		t.Fatal(err)
	}
	in, err := New(Config{
		Dir:      filepath.Join(t.TempDir(), "q"),
		Kafka:    &Kafka{Seeds: seeds, Topic: "events"},
		RetryMin: 20 * time.Millisecond, RetryMax: time.Second,
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tag := SourceTag(kafkaName("events", 0))
	r := startReader(t, in.Queue(), tag, 0, true)
	defer r.stop() // before in.Close
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- in.Run(runCtx) }()
	r.waitCount(t, batch, time.Minute)

	c.Close()
	waitFor(t, time.Minute, "Progress to report the broker unreachable", func() bool { return in.Progress().Err != nil })
	t.Logf("broker down: %v", in.Progress())
	late := startReader(t, in.Queue(), tag, 0, true)
	late.waitCount(t, batch, time.Minute)
	late.stop()

	c = start()
	if err := produce(ctx, cl, "events", batch, 2*batch); err != nil {
		t.Fatal(err)
	}
	r.waitCount(t, 2*batch, 2*time.Minute)
	waitFor(t, time.Minute, "the lag to read 0 and the error to clear", func() bool {
		p := in.Progress()
		return p.Stored == 2*batch-1 && p.Lag == 0 && p.Err == nil
	})
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	seqs, msgs := readPartition(t, seeds, "events")
	r.sameAsEngine(t, seqs, msgs)
}
