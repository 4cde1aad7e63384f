package eda

import (
	"context"
	"errors"
)

// Transport carries the chain's topics. The offmap queue is one (Queues);
// the peer comparison module supplies others (NATS, Kafka protocol, Redis).
type Transport interface {
	// Name names the transport in reports.
	Name() string
	// Topic opens the named topic: a producer and a consumer that reads
	// every message produced after it was opened.
	Topic(name string) (Producer, Consumer, error)
	// Close releases the transport.
	Close() error
}

// Producer publishes messages to a topic.
type Producer interface {
	Send(msg []byte) error
}

// Consumer reads a topic in order.
type Consumer interface {
	// Poll returns the next message, or ok=false when none is ready. The
	// slice is valid until the next call.
	Poll() (msg []byte, ok bool, err error)
	// Wait blocks until a message may be ready or ctx is done.
	Wait(ctx context.Context) error
}

// errStopped ends a service loop.
var errStopped = errors.New("eda: stopped")
