package eda

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/offmap/offmap/queue"
)

// Queues is the transport of offmap queues: each topic is a queue
// directory under Dir.
type Queues struct {
	Dir     string
	Options queue.Options

	mu     sync.Mutex
	queues []*queue.Queue
}

// Name implements Transport.
func (t *Queues) Name() string { return "offmap-queue" }

// Topic opens (or creates) the topic's queue and a tailer at its start.
func (t *Queues) Topic(name string) (Producer, Consumer, error) {
	q, err := queue.Open(filepath.Join(t.Dir, name), t.Options)
	if err != nil {
		return nil, nil, err
	}
	if err := q.Prepare(); err != nil {
		q.Close()
		return nil, nil, err
	}
	tl, err := q.Tailer()
	if err != nil {
		q.Close()
		return nil, nil, err
	}
	t.mu.Lock()
	t.queues = append(t.queues, q)
	t.mu.Unlock()
	return queueProducer{q}, &queueConsumer{t: tl}, nil
}

// Close closes every queue the transport opened.
func (t *Queues) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first error
	for _, q := range t.queues {
		if err := q.Close(); err != nil && first == nil {
			first = err
		}
	}
	t.queues = nil
	return first
}

type queueProducer struct{ q *queue.Queue }

func (p queueProducer) Send(msg []byte) error {
	_, err := p.q.Append(msg)
	return err
}

type queueConsumer struct{ t *queue.Tailer }

func (c *queueConsumer) Poll() ([]byte, bool, error) {
	_, msg, err := c.t.Next()
	if err == queue.ErrNoMessage {
		return nil, false, nil
	}
	return msg, err == nil, err
}

func (c *queueConsumer) Wait(ctx context.Context) error { return c.t.Wait(ctx, queue.Block) }

// queueOf returns the queue behind a producer of this transport, for the
// event loops' prefetching.
func queueOf(p Producer) (*queue.Queue, bool) {
	qp, ok := p.(queueProducer)
	return qp.q, ok
}

// tailer returns the queue tailer behind a consumer of this transport,
// for the event-loop mode.
func tailerOf(c Consumer) (*queue.Tailer, bool) {
	qc, ok := c.(*queueConsumer)
	if !ok {
		return nil, false
	}
	return qc.t, true
}
