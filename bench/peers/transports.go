package peers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/offmap/offmap/bench/eda"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every peer consumer here prefetches, as the peers' own clients do: the
// NATS client pushes messages into a channel from its connection's reader,
// the Kafka client (kgo) long-polls fetches in the background and buffers
// them, and the Redis consumer has a goroutine blocking in XREAD BLOCK on
// a connection of its own. So Poll never makes a round trip; it takes the
// next buffered message or reports none, and Wait blocks until one is
// buffered. Producers send asynchronously where the client can (NATS
// PublishAsync, kgo Produce), so that the chain's single pacer goroutine
// does not wait for a broker's acknowledgement between instances; go-redis
// has no asynchronous send, so an XADD is one round trip.

// chanConsumer is a consumer fed through a channel by a client's own
// reader; a failure of that reader is reported by the next Poll.
type chanConsumer struct {
	ch      chan []byte
	pending []byte
	has     bool
	err     *atomic.Pointer[error]
}

func newChanConsumer(n int, errp *atomic.Pointer[error]) *chanConsumer {
	return &chanConsumer{ch: make(chan []byte, n), err: errp}
}

func (c *chanConsumer) Poll() ([]byte, bool, error) {
	if c.has {
		c.has = false
		return c.pending, true, nil
	}
	select {
	case m := <-c.ch:
		return m, true, nil
	default:
	}
	if e := c.err.Load(); e != nil {
		return nil, false, *e
	}
	return nil, false, nil
}

func (c *chanConsumer) Wait(ctx context.Context) error {
	if c.has {
		return nil
	}
	select {
	case c.pending = <-c.ch:
		c.has = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func setErr(p *atomic.Pointer[error], err error) {
	if err != nil {
		p.CompareAndSwap(nil, &err)
	}
}

// ---- NATS JetStream ----

// NATSTransport is NATS JetStream with file storage: an embedded
// nats-server listening on loopback, its store in the run's directory, one
// stream per topic, published with PublishAsync and read by an ordered push
// consumer (no acks, flow control) delivering into a channel. Clients talk
// to the server over TCP as separate processes would; the server runs in
// this process, so its CPU counts in the run's.
type NATSTransport struct {
	srv    *server.Server
	pub    *nats.Conn
	sub    *nats.Conn
	js     nats.JetStreamContext
	jsSub  nats.JetStreamContext
	err    atomic.Pointer[error]
	mu     sync.Mutex
	subs   []*nats.Subscription
	closed bool
}

// NewNATS starts an embedded JetStream server storing under dir.
func NewNATS(dir string) (*NATSTransport, error) {
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: filepath.Join(dir, "nats"), DisableJetStreamBanner: true,
	})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("peers: NATS server did not start")
	}
	t := &NATSTransport{srv: srv}
	handler := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { setErr(&t.err, err) })
	if t.pub, err = nats.Connect(srv.ClientURL(), handler); err != nil {
		srv.Shutdown()
		return nil, err
	}
	if t.sub, err = nats.Connect(srv.ClientURL(), handler); err != nil {
		t.pub.Close()
		srv.Shutdown()
		return nil, err
	}
	if t.js, err = t.pub.JetStream(nats.PublishAsyncMaxPending(1<<16),
		nats.PublishAsyncErrHandler(func(_ nats.JetStream, _ *nats.Msg, err error) { setErr(&t.err, err) })); err == nil {
		t.jsSub, err = t.sub.JetStream()
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Name implements eda.Transport.
func (t *NATSTransport) Name() string { return "NATS JetStream (file)" }

// Topic creates the topic's stream and an ordered consumer from its start.
func (t *NATSTransport) Topic(name string) (eda.Producer, eda.Consumer, error) {
	if _, err := t.js.AddStream(&nats.StreamConfig{
		Name: name, Subjects: []string{name}, Storage: nats.FileStorage, Replicas: 1,
	}); err != nil {
		return nil, nil, fmt.Errorf("NATS stream %s: %w", name, err)
	}
	natsCh := make(chan *nats.Msg, 1<<16)
	sub, err := t.jsSub.ChanSubscribe(name, natsCh, nats.OrderedConsumer(), nats.DeliverAll())
	if err != nil {
		return nil, nil, fmt.Errorf("NATS consumer %s: %w", name, err)
	}
	t.mu.Lock()
	t.subs = append(t.subs, sub)
	t.mu.Unlock()
	return &natsProducer{t: t, subj: name}, &natsConsumer{ch: natsCh, err: &t.err}, nil
}

type natsProducer struct {
	t    *NATSTransport
	subj string
}

// Send publishes asynchronously; a failed publish is reported by the
// error handler and surfaces in a consumer's Poll.
func (p *natsProducer) Send(msg []byte) error {
	if e := p.t.err.Load(); e != nil {
		return *e
	}
	_, err := p.t.js.PublishAsync(p.subj, append([]byte(nil), msg...))
	return err
}

// natsConsumer reads the client's delivery channel directly.
type natsConsumer struct {
	ch      chan *nats.Msg
	pending *nats.Msg
	err     *atomic.Pointer[error]
}

func (c *natsConsumer) Poll() ([]byte, bool, error) {
	if m := c.pending; m != nil {
		c.pending = nil
		return m.Data, true, nil
	}
	select {
	case m := <-c.ch:
		return m.Data, true, nil
	default:
	}
	if e := c.err.Load(); e != nil {
		return nil, false, *e
	}
	return nil, false, nil
}

func (c *natsConsumer) Wait(ctx context.Context) error {
	if c.pending != nil {
		return nil
	}
	select {
	case c.pending = <-c.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the consumers, the connections and the server.
func (t *NATSTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	for _, s := range t.subs {
		s.Unsubscribe()
	}
	if t.pub != nil {
		select {
		case <-t.js.PublishAsyncComplete():
		case <-time.After(5 * time.Second):
		}
		t.pub.Close()
	}
	if t.sub != nil {
		t.sub.Close()
	}
	t.srv.Shutdown()
	t.srv.WaitForShutdown()
	return nil
}

// ---- Kafka protocol: kfake + kgo ----

// KafkaTransport is the Kafka wire protocol through franz-go's kfake, an
// in-process cluster of one broker persisting to the run's directory
// (through the page cache, as Kafka does by default), and the kgo client
// tuned for latency: acks from the leader only, no linger, no idempotent
// producer. kfake is a protocol stand-in, not Kafka: a real broker (a JVM)
// cannot be installed on these machines. One producer client serves every
// topic; each consumer is a client of its own reading its topic's single
// partition from the start, with no consumer group.
type KafkaTransport struct {
	cluster *kfake.Cluster
	prod    *kgo.Client
	err     atomic.Pointer[error]
	mu      sync.Mutex
	cons    []*kgo.Client
	closed  bool
}

// NewKafka starts a one-broker kfake cluster storing under dir.
func NewKafka(dir string) (*KafkaTransport, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(filepath.Join(dir, "kafka")))
	if err != nil {
		return nil, err
	}
	t := &KafkaTransport{cluster: c}
	t.prod, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	if err != nil {
		c.Close()
		return nil, err
	}
	return t, nil
}

// Name implements eda.Transport.
func (t *KafkaTransport) Name() string { return "Kafka protocol (kfake)" }

// Topic creates a one-partition topic and a consumer of it.
func (t *KafkaTransport) Topic(name string) (eda.Producer, eda.Consumer, error) {
	if err := t.cluster.CreateTopic(name, 1, nil); err != nil {
		return nil, nil, fmt.Errorf("kfake topic %s: %w", name, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.cluster.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{name: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	t.cons = append(t.cons, cl)
	t.mu.Unlock()
	return &kafkaProducer{t: t, topic: name}, &kafkaConsumer{cl: cl, err: &t.err}, nil
}

type kafkaProducer struct {
	t     *KafkaTransport
	topic string
}

// Send produces asynchronously, as Kafka producers do; a failure surfaces
// in the next Send and in the consumers' Poll.
func (p *kafkaProducer) Send(msg []byte) error {
	if e := p.t.err.Load(); e != nil {
		return *e
	}
	p.t.prod.Produce(context.Background(), &kgo.Record{Topic: p.topic, Value: append([]byte(nil), msg...)},
		func(_ *kgo.Record, err error) { setErr(&p.t.err, err) })
	return nil
}

type kafkaConsumer struct {
	cl   *kgo.Client
	buf  []*kgo.Record
	next int
	err  *atomic.Pointer[error]
}

func (c *kafkaConsumer) take(f kgo.Fetches) error {
	var ferr error
	f.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
			ferr = err
		}
	})
	c.buf, c.next = f.Records(), 0
	return ferr
}

// Poll returns a buffered record; with none buffered it asks the client
// for what its background fetches have buffered, without waiting.
func (c *kafkaConsumer) Poll() ([]byte, bool, error) {
	if c.next >= len(c.buf) {
		if e := c.err.Load(); e != nil {
			return nil, false, *e
		}
		//lint:ignore SA1012 a nil context asks kgo not to wait
		if err := c.take(c.cl.PollRecords(nil, 0)); err != nil { //nolint:staticcheck
			return nil, false, err
		}
		if c.next >= len(c.buf) {
			return nil, false, nil
		}
	}
	r := c.buf[c.next]
	c.next++
	return r.Value, true, nil
}

func (c *kafkaConsumer) Wait(ctx context.Context) error {
	if c.next < len(c.buf) {
		return nil
	}
	err := c.take(c.cl.PollRecords(ctx, 0))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Close closes the clients and the cluster.
func (t *KafkaTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.prod.Flush(ctx)
	cancel()
	t.prod.Close()
	for _, c := range t.cons {
		c.Close()
	}
	t.cluster.Close()
	return nil
}

// ---- Redis Streams ----

// RedisStreamsTransport carries each topic in a Redis stream of a
// redis-server (StartRedis): XADD for each message (one round trip, from a
// pooled client), and for each consumer a connection of its own and a
// goroutine blocking in XREAD BLOCK that hands the entries over through a
// channel.
type RedisStreamsTransport struct {
	srv    *RedisServer
	prod   *redis.Client
	err    atomic.Pointer[error]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	keys   []string
	cons   []*redis.Client
	closed bool
}

// NewRedisStreams uses the server srv; Close deletes the streams it made.
func NewRedisStreams(srv *RedisServer) (*RedisStreamsTransport, error) {
	if srv == nil {
		return nil, ErrNoRedis
	}
	t := &RedisStreamsTransport{srv: srv, prod: srv.Client(256)}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if err := t.prod.Ping(t.ctx).Err(); err != nil {
		t.prod.Close()
		return nil, err
	}
	return t, nil
}

// Name implements eda.Transport.
func (t *RedisStreamsTransport) Name() string { return "Redis Streams" }

// Topic starts the topic's reader from the stream's start.
func (t *RedisStreamsTransport) Topic(name string) (eda.Producer, eda.Consumer, error) {
	key := "stream:" + name
	cl := t.srv.Client(1)
	t.mu.Lock()
	t.keys = append(t.keys, key)
	t.cons = append(t.cons, cl)
	t.mu.Unlock()
	c := newChanConsumer(4096, &t.err)
	t.wg.Add(1)
	go t.read(cl, key, c.ch)
	return &redisProducer{t: t, key: key}, c, nil
}

func (t *RedisStreamsTransport) read(cl *redis.Client, key string, ch chan<- []byte) {
	defer t.wg.Done()
	last := "0"
	for t.ctx.Err() == nil {
		res, err := cl.XRead(t.ctx, &redis.XReadArgs{Streams: []string{key, last}, Count: 256, Block: time.Second}).Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			if t.ctx.Err() == nil {
				setErr(&t.err, fmt.Errorf("XREAD %s: %w", key, err))
			}
			return
		}
		for _, s := range res {
			for _, m := range s.Messages {
				last = m.ID
				v, _ := m.Values["d"].(string)
				select {
				case ch <- []byte(v):
				case <-t.ctx.Done():
					return
				}
			}
		}
	}
}

type redisProducer struct {
	t   *RedisStreamsTransport
	key string
}

func (p *redisProducer) Send(msg []byte) error {
	return p.t.prod.XAdd(p.t.ctx, &redis.XAddArgs{Stream: p.key, Values: []any{"d", msg}}).Err()
}

// Close stops the readers and deletes the streams.
func (t *RedisStreamsTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.cancel()
	for _, c := range t.cons {
		c.Close()
	}
	t.wg.Wait()
	var err error
	ctx := context.Background()
	for lo := 0; lo < len(t.keys); lo += 500 {
		if e := t.prod.Del(ctx, t.keys[lo:min(lo+500, len(t.keys))]...).Err(); e != nil && err == nil {
			err = e
		}
	}
	t.prod.Close()
	return err
}
