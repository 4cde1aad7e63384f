package edasplit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/offmap/offmap/bench/eda"
)

// AllOnEngine runs every topic of the chain on JetStream: the reference
// the split is measured against. It is bench/peers' NATS transport, written
// again here (that module is separate), on the same engine as the split
// (Engine: nodes and replicas) so that the two differ only in what crosses
// the engine: six topics per message here, one in the split.
//
// One stream per topic, file storage; messages published with
// PublishAsync (the chain's single pacer goroutine must not wait for an
// acknowledgement between instances); each topic read by an ordered push
// consumer (no acknowledgements, flow control) delivering into a channel,
// so that Poll never makes a round trip, as the peers' clients prefetch.
// Producers and consumers have a connection each, as the services of
// another process would.
type AllOnEngine struct {
	eng *engine
	pub *nats.Conn
	sub *nats.Conn
	js  nats.JetStreamContext
	jsS nats.JetStreamContext
	err atomic.Pointer[error]

	mu     sync.Mutex
	subs   []*nats.Subscription
	closed bool
}

// NewAllOnEngine starts the engine under dir and returns the transport.
func NewAllOnEngine(dir string, e Engine) (*AllOnEngine, error) {
	eng, err := startEngine(dir, e)
	if err != nil {
		return nil, err
	}
	t := &AllOnEngine{eng: eng}
	onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { t.fail(err) })
	if t.pub, err = nats.Connect(eng.urlsFrom(0), nats.DontRandomize(), connectTimeout, onErr); err == nil {
		t.sub, err = nats.Connect(eng.urlsFrom(1), nats.DontRandomize(), connectTimeout, onErr)
	}
	if err == nil {
		t.js, err = t.pub.JetStream(nats.PublishAsyncMaxPending(1<<16),
			nats.PublishAsyncErrHandler(func(_ nats.JetStream, _ *nats.Msg, err error) { t.fail(err) }))
	}
	if err == nil {
		t.jsS, err = t.sub.JetStream()
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("edasplit: %w", err)
	}
	return t, nil
}

func (t *AllOnEngine) fail(err error) {
	if err != nil {
		t.err.CompareAndSwap(nil, &err)
	}
}

// Name implements eda.Transport.
func (t *AllOnEngine) Name() string { return "all on engine: " + t.eng.cfg.String() }

// Topic implements eda.Transport: a stream and an ordered consumer from its
// start.
func (t *AllOnEngine) Topic(name string) (eda.Producer, eda.Consumer, error) {
	if err := t.eng.createStream(name); err != nil {
		return nil, nil, err
	}
	ch := make(chan *nats.Msg, 1<<16)
	sub, err := t.jsS.ChanSubscribe(name, ch, nats.OrderedConsumer(), nats.DeliverAll())
	if err != nil {
		return nil, nil, fmt.Errorf("edasplit: consumer of %s: %w", name, err)
	}
	t.mu.Lock()
	t.subs = append(t.subs, sub)
	t.mu.Unlock()
	return &jsProducer{t: t, subj: name}, &jsConsumer{ch: ch, err: &t.err}, nil
}

// Close stops the consumers, waits (up to 5 s) for the publishes in
// flight, and shuts the engine down.
func (t *AllOnEngine) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	for _, s := range t.subs {
		s.Unsubscribe()
	}
	if t.js != nil {
		select {
		case <-t.js.PublishAsyncComplete():
		case <-time.After(5 * time.Second):
		}
	}
	if t.pub != nil {
		t.pub.Close()
	}
	if t.sub != nil {
		t.sub.Close()
	}
	t.eng.close()
	return nil
}

type jsProducer struct {
	t    *AllOnEngine
	subj string
}

// Send publishes asynchronously: a refused publish is reported by the
// error handler, and surfaces in the next Send and in consumers' Poll.
func (p *jsProducer) Send(msg []byte) error {
	if e := p.t.err.Load(); e != nil {
		return *e
	}
	_, err := p.t.js.PublishAsync(p.subj, append([]byte(nil), msg...))
	return err
}

// jsConsumer reads the client's delivery channel.
type jsConsumer struct {
	ch      chan *nats.Msg
	pending *nats.Msg
	err     *atomic.Pointer[error]
}

func (c *jsConsumer) Poll() ([]byte, bool, error) {
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

func (c *jsConsumer) Wait(ctx context.Context) error {
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
