package edasplit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/ingest"
	"github.com/offmap/offmap/replicate/mirror"
)

// BridgedTopic is the topic that crosses from host A to host B: topic 2,
// which service 2 (the last on host A) writes and service 3 (the first on
// host B) reads.
const BridgedTopic = 2

// SplitOptions configure the split.
type SplitOptions struct {
	Engine Engine
	// Queues are the options of every queue of both hosts (the zero
	// value: the queue's defaults, as eda.Queues), but for the mirror's
	// handle, which never spins (see Split.bridge).
	Queues queue.Options
	// Shared carries topic 2 of every instance over one bridge: one queue
	// on host A, one mirror, one stream, one ingest, one queue on host B,
	// each message tagged with its instance's topic; each service 3 reads
	// the shared queue and keeps its own. Otherwise each instance's topic
	// 2 has a bridge of its own (a queue, a mirror, a stream, an ingest
	// and a queue), as each of the chain's topics is a queue or a stream
	// of its own everywhere else.
	//
	// The engine's cost is mostly per message and per stream: a message
	// wakes the mirror, the stream's store and delivery, the ingest, each
	// on its own. One shared stream takes the messages the pacer releases
	// together (one per instance, every millisecond) as one burst through
	// each stage. The price: every service 3 reads every instance's
	// messages (instances² reads), and with the Block wait every append
	// wakes every service 3, so Shared suits the Park wait.
	Shared bool
}

// Split is the chain split over two hosts: topics 0 and 1 are offmap
// queues in host A's directory, topics 3 to 5 offmap queues in host B's,
// and topic 2 is bridged through the engine (see the package
// documentation). It implements eda.Transport.
type Split struct {
	eng    *engine
	opts   SplitOptions
	hostA  *eda.Queues
	hostB  *eda.Queues
	dirA   string
	dirB   string
	connA  *nats.Conn // host A's connection, shared by its mirrors
	ctx    context.Context
	cancel context.CancelFunc
	err    atomic.Pointer[error] // the first fatal error of a mirror or an ingest

	mu      sync.Mutex
	bridges []*bridge
	shared  *bridge       // the bridge of every instance (Shared)
	stats   []BridgeStats // at Close
	closed  bool

	// fault, set by tests only, makes the bridge's consumers lose or
	// duplicate a message on purpose, to prove the checks see it.
	fault fault
}

// fault is a deliberate defect of a bridge's consumer: at its at-th
// message (from 1), drop it or deliver it twice.
type fault struct {
	drop, dup bool
	at        int64
}

// BridgeStats is what one bridge carried, counted at each of its four
// stages. Exactly once means all four equal (and the consumers saw the
// engine's sequences 1, 2, 3, ... with none missing or repeated, which
// they check as they read).
type BridgeStats struct {
	Stream     string
	Topics     int    // instances' topics it carries: 1, or all (Shared)
	Produced   int64  // appended to host A's queue by service 2
	Acked      uint64 // acknowledged by the engine to the mirror
	Sent       uint64 // published by the mirror, resends included
	Duplicates uint64 // publishes the engine recognised as already stored
	Restarts   uint64 // mirror sessions that failed and were started again
	Ingested   uint64 // appended to host B's queue by the ingest
	Consumed   int64  // read from host B's queue by service 3
}

// NewSplit starts the engine under dir and returns the split transport;
// host A's queues go to dir/hostA, host B's to dir/hostB.
func NewSplit(dir string, o SplitOptions) (*Split, error) {
	eng, err := startEngine(dir, o.Engine)
	if err != nil {
		return nil, err
	}
	t := &Split{eng: eng, opts: o, dirA: filepath.Join(dir, "hostA"), dirB: filepath.Join(dir, "hostB")}
	for _, d := range []string{t.dirA, t.dirB} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			eng.close()
			return nil, fmt.Errorf("edasplit: %w", err)
		}
	}
	t.hostA, t.hostB = &eda.Queues{Dir: t.dirA, Options: o.Queues}, &eda.Queues{Dir: t.dirB, Options: o.Queues}
	t.connA, err = nats.Connect(eng.urlsFrom(0), nats.DontRandomize(), nats.Name("edasplit host A mirrors"),
		nats.MaxReconnects(-1), connectTimeout)
	if err != nil {
		eng.close()
		return nil, fmt.Errorf("edasplit: %w", err)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// Name implements eda.Transport.
func (t *Split) Name() string {
	how := "a stream per instance"
	if t.opts.Shared {
		how = "one stream for all instances"
	}
	return fmt.Sprintf("split: offmap queues, topic %d bridged over %s, %s", BridgedTopic, t.eng.cfg, how)
}

// Topic implements eda.Transport: by the topic's number, a queue on host
// A, a queue on host B, or the bridge between them.
func (t *Split) Topic(name string) (eda.Producer, eda.Consumer, error) {
	k, err := topicNumber(name)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case k < BridgedTopic:
		return t.hostA.Topic(name)
	case k > BridgedTopic:
		return t.hostB.Topic(name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, errors.New("edasplit: transport closed")
	}
	if !t.opts.Shared {
		b, err := t.bridge(name)
		if err != nil {
			return nil, nil, err
		}
		b.topics = 1
		p := &bridgeProducer{b: b}
		c, err := b.consumer(name, 0, t)
		return p, c, err
	}
	if t.shared == nil {
		if t.shared, err = t.bridge("bridge"); err != nil {
			return nil, nil, err
		}
	}
	b := t.shared
	b.topics++
	tag := uint32(b.topics) // from 1: 0 means "not shared" to the consumer
	p := &bridgeProducer{b: b, tag: tag}
	c, err := b.consumer(name, tag, t)
	return p, c, err
}

// topicNumber reads k from eda's topic name topic<random><k>: the
// transport is told only the name, and the chain's naming is what says
// which service writes the topic.
func topicNumber(name string) (int, error) {
	if len(name) < 2 {
		return 0, fmt.Errorf("edasplit: topic name %q does not end with its number", name)
	}
	k := int(name[len(name)-1] - '0')
	if k < 0 || k > eda.Services {
		return 0, fmt.Errorf("edasplit: topic name %q does not end with its number", name)
	}
	return k, nil
}

// bridge is A's queue, its mirror to a stream, the ingest of the stream
// into B's queue, and what the consumers of B's queue read.
type bridge struct {
	name     string
	topics   int // instances' topics it carries
	qa       *queue.Queue
	m        *mirror.Mirror
	in       *ingest.Ingest
	source   uint32 // the ingest's frame tag of the stream
	tailers  []*queue.Tailer
	produced atomic.Int64
	consumed atomic.Int64
	runs     sync.WaitGroup
}

// bridge makes a bridge through the stream name and starts its mirror and
// ingest; t.mu is held.
func (t *Split) bridge(name string) (*bridge, error) {
	if err := t.eng.createStream(name); err != nil {
		return nil, err
	}
	b := &bridge{name: name}
	ok := false
	defer func() {
		if !ok {
			b.close()
		}
	}()
	var err error
	// Host A: service 2 appends to a queue; the mirror follows it,
	// blocking in the queue (queue.Block) when it has caught up. Its
	// handle does not spin before sleeping (BlockSpin -1): at 1,000
	// messages a second a mirror has always caught up long before the
	// next one, so the default 50 us spin is spent after every message
	// for nothing, a quarter of a core at 5 instances on this 2-core
	// machine, where the CPU is what limits the instances.
	oa := t.opts.Queues
	oa.BlockSpin = -1
	if b.qa, err = queue.Open(filepath.Join(t.dirA, name), oa); err != nil {
		return nil, err
	}
	if err := b.qa.Prepare(); err != nil {
		return nil, err
	}
	b.m, err = mirror.NewJetStream(mirror.Config{
		Queue: b.qa, TailerName: "mirror", SourceID: "hostA/" + name,
		// Keep the mirror's sessions short-lived on a stall: a run lasts
		// seconds, and a session that waits the default 10 s for an
		// acknowledgement would hide the stall in the grace period.
		Timeout: 5 * time.Second,
	}, mirror.JetStream{Conn: t.connA, Stream: name, Subject: name})
	if err != nil {
		return nil, err
	}
	// Host B: the ingest appends to a queue; service 3 reads it.
	b.in, err = ingest.New(ingest.Config{
		Dir: filepath.Join(t.dirB, name), QueueOptions: t.opts.Queues,
		JetStream: &ingest.JetStream{URLs: t.eng.urlsFrom(1), Stream: name,
			Options: []nats.Option{nats.DontRandomize(), connectTimeout}},
	})
	if err != nil {
		return nil, err
	}
	if err := b.in.Queue().Prepare(); err != nil {
		return nil, err
	}
	b.source = ingest.SourceTag(b.in.Progress().Source)
	b.runs.Add(2)
	go func() {
		defer b.runs.Done()
		if err := b.m.Run(t.ctx); err != nil {
			t.fail(fmt.Errorf("edasplit: mirror of %s: %w", name, err))
		}
	}()
	go func() {
		defer b.runs.Done()
		if err := b.in.Run(t.ctx); err != nil {
			t.fail(fmt.Errorf("edasplit: ingest of %s: %w", name, err))
		}
	}()
	t.bridges = append(t.bridges, b)
	ok = true
	return b, nil
}

// consumer returns a consumer of topic reading B's queue from its start:
// with tag 0 every message, otherwise those its producer tagged so.
func (b *bridge) consumer(topic string, tag uint32, t *Split) (*bridgeConsumer, error) {
	tl, err := b.in.Queue().Tailer()
	if err != nil {
		return nil, err
	}
	b.tailers = append(b.tailers, tl)
	return &bridgeConsumer{b: b, t: tl, topic: topic, tag: tag, next: 1, err: &t.err, fault: t.fault}, nil
}

func (t *Split) fail(err error) { t.err.CompareAndSwap(nil, &err) }

// Err returns the first error that stopped a mirror or an ingest, nil if
// none did. Consumers of the bridge report it too, from Poll.
func (t *Split) Err() error {
	if e := t.err.Load(); e != nil {
		return *e
	}
	return nil
}

// Stats returns what each bridge carried. After Close it is the final
// count; before, a snapshot.
func (t *Split) Stats() []BridgeStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return t.stats
	}
	return t.snapshot()
}

func (t *Split) snapshot() []BridgeStats {
	out := make([]BridgeStats, 0, len(t.bridges))
	for _, b := range t.bridges {
		mp, ip := b.m.Progress(), b.in.Progress()
		out = append(out, BridgeStats{
			Stream: b.name, Topics: b.topics, Produced: b.produced.Load(),
			Acked: mp.Acked, Sent: mp.Sent, Duplicates: mp.Duplicates, Restarts: mp.Restarts,
			Ingested: ip.Appended, Consumed: b.consumed.Load(),
		})
	}
	return out
}

// Close stops the mirrors and ingests (a mirror first waits for the
// acknowledgement of what it sent), records their counts for Stats, and
// shuts the engine down.
func (t *Split) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.cancel()
	for _, b := range t.bridges {
		b.runs.Wait()
	}
	t.stats = t.snapshot()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, b := range t.bridges {
		keep(b.close())
	}
	keep(t.hostA.Close())
	keep(t.hostB.Close())
	t.connA.Close()
	t.eng.close()
	return first
}

// close releases what bridge opened; its goroutines must have returned.
func (b *bridge) close() error {
	var first error
	for _, tl := range b.tailers {
		tl.Close()
	}
	if b.in != nil {
		first = b.in.Close()
	}
	if b.qa != nil {
		if err := b.qa.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// tagSize is the prefix a shared bridge puts before each message: the
// tag of its instance's topic, and padding that keeps the payload 8-byte
// aligned as the queue and the ingest's frame keep it.
const tagSize = 8

// bridgeProducer appends to host A's queue, as eda.Queues' producer does
// (after the topic's tag on a shared bridge), and counts the messages for
// Stats.
type bridgeProducer struct {
	b   *bridge
	tag uint32 // 0: not shared
}

func (p *bridgeProducer) Send(msg []byte) error {
	if p.tag == 0 {
		if _, err := p.b.qa.Append(msg); err != nil {
			return err
		}
	} else {
		w, err := p.b.qa.Reserve(tagSize + len(msg))
		if err != nil {
			return err
		}
		buf := w.Bytes()
		binary.LittleEndian.PutUint64(buf, uint64(p.tag))
		copy(buf[tagSize:], msg)
		if _, err := w.Commit(); err != nil {
			return err
		}
	}
	p.b.produced.Add(1)
	return nil
}

// bridgeConsumer reads host B's queue, which the ingest fills, and strips
// the ingest's frame (and on a shared bridge skips other topics' messages
// and strips the tag). It checks every frame as it goes: the stream's
// sequences must come 1, 2, 3, ... from the bridge's stream, so that a
// message the bridge lost or stored twice stops the run with an error
// naming the sequence, beyond what the chain's own counts show.
type bridgeConsumer struct {
	b     *bridge
	t     *queue.Tailer
	topic string
	tag   uint32 // 0: not shared
	next  uint64 // the engine sequence expected next
	err   *atomic.Pointer[error]

	fault   fault
	seen    int64  // messages of this topic read, for the fault
	pending []byte // a message to deliver again (fault.dup)
}

func (c *bridgeConsumer) Poll() ([]byte, bool, error) {
	if c.pending != nil {
		msg := c.pending
		c.pending = nil
		c.b.consumed.Add(1)
		return msg, true, nil
	}
	for {
		_, msg, err := c.t.Next()
		if errors.Is(err, queue.ErrNoMessage) {
			if e := c.err.Load(); e != nil {
				return nil, false, *e
			}
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		f, payload, err := ingest.Split(msg)
		if err != nil {
			return nil, false, fmt.Errorf("edasplit: topic %s: %w", c.topic, err)
		}
		if f.Source != c.b.source {
			return nil, false, fmt.Errorf("edasplit: topic %s: message from source tag %#08x, want %#08x", c.topic, f.Source, c.b.source)
		}
		if f.Seq != c.next {
			what := "lost"
			if f.Seq < c.next {
				what = "duplicated"
			}
			return nil, false, fmt.Errorf("edasplit: topic %s: engine sequence %d where %d was due: the bridge %s messages", c.topic, f.Seq, c.next, what)
		}
		c.next++
		if c.tag != 0 {
			if len(payload) < tagSize {
				return nil, false, fmt.Errorf("edasplit: topic %s: engine sequence %d: %d bytes, no topic tag", c.topic, f.Seq, len(payload))
			}
			if binary.LittleEndian.Uint64(payload) != uint64(c.tag) {
				continue // another instance's
			}
			payload = payload[tagSize:]
		}
		c.seen++
		if c.fault.at == c.seen {
			switch {
			case c.fault.drop:
				continue
			case c.fault.dup:
				c.pending = append([]byte(nil), payload...)
			}
		}
		c.b.consumed.Add(1)
		return payload, true, nil
	}
}

func (c *bridgeConsumer) Wait(ctx context.Context) error {
	if c.pending != nil {
		return nil
	}
	return c.t.Wait(ctx, queue.Block)
}
