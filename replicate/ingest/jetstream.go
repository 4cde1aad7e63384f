package ingest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsSource reads a stream through an ordered consumer: ephemeral, no
// acknowledgements, in stream order, starting at a given sequence. It is
// the consumer JetStream has for exactly this: the client checks every
// delivery's consumer sequence and, on a hole (a lost message, a missed
// heartbeat, a reconnection), recreates the consumer after the last
// message it returned. No durable consumer state lives on the server:
// the queue is the record of progress.
type jsSource struct {
	cfg  JetStream
	opts []nats.Option

	mu sync.Mutex
	nc *nats.Conn
	js jetstream.JetStream
}

func newJetStream(j *JetStream) *jsSource {
	opts := []nats.Option{
		nats.Name("offmap ingest " + j.Stream),
		nats.MaxReconnects(-1), // the connection outlives any outage; Run's loop handles the rest
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
	}
	return &jsSource{cfg: *j, opts: append(opts, j.Options...)}
}

func (s *jsSource) none() int64 { return 0 }

// exact: without a filter, stream sequences are contiguous but for
// deleted messages; with one, they jump over other subjects' messages.
func (s *jsSource) exact() bool { return s.cfg.Subject == "" }

// jumpsMidSession: a consumer whose next message retention removed
// delivers the first one left, with nothing to tell; a jump is checked.
// (Streams with many deleted messages, a key-value bucket's, pay one
// request per jump: ingest them with a filter, which checks none.)
func (s *jsSource) jumpsMidSession() bool { return s.exact() }

// connect returns the JetStream context, connecting first if needed. The
// connection reconnects by itself; a new one is made only when it was
// closed (the caller's options may limit reconnection attempts).
func (s *jsSource) connect() (jetstream.JetStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil && !s.nc.IsClosed() {
		if !s.nc.IsConnected() {
			// Requests would wait for their timeout: fail at once, and
			// let Run retry after its back-off, by when the connection
			// may be back.
			return nil, fmt.Errorf("ingest: not connected to %s (reconnecting): %w", s.cfg.URLs, nats.ErrDisconnected)
		}
		return s.js, nil
	}
	nc, err := nats.Connect(s.cfg.URLs, s.opts...)
	if err != nil {
		return nil, fmt.Errorf("ingest: connecting to %s: %w", s.cfg.URLs, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("ingest: %w", err)
	}
	s.nc, s.js = nc, js
	return js, nil
}

func (s *jsSource) bounds(ctx context.Context) (first, last int64, err error) {
	js, err := s.connect()
	if err != nil {
		return 0, 0, err
	}
	st, err := js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return 0, 0, fmt.Errorf("ingest: stream %s: %w", s.cfg.Stream, err)
	}
	state := st.CachedInfo().State
	first, last = int64(state.FirstSeq), int64(state.LastSeq)
	if first == 0 { // a stream that never held a message
		first = last + 1
	}
	return first, last, nil
}

func (s *jsSource) consume(ctx context.Context, from int64, ss *session) error {
	js, err := s.connect()
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   uint64(from),
		// One attempt per reset: when recreating the consumer fails,
		// Next returns the error and Run's loop, which restarts from the
		// queue and reports the error in Progress, retries.
		MaxResetAttempts: 1,
		// The server drops the consumer of a killed ingest after this.
		InactiveThreshold: time.Minute,
	}
	if s.cfg.Subject != "" {
		cfg.FilterSubjects = []string{s.cfg.Subject}
	}
	cons, err := js.OrderedConsumer(ctx, s.cfg.Stream, cfg)
	if err != nil {
		return fmt.Errorf("ingest: consumer on stream %s: %w", s.cfg.Stream, err)
	}
	it, err := cons.Messages(jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(2*time.Second))
	if err != nil {
		return fmt.Errorf("ingest: consuming stream %s: %w", s.cfg.Stream, err)
	}
	defer it.Stop()
	// A reset inside Next (after a reconnection) does not watch ctx:
	// closing the connection ends it at once when Run is stopped.
	defer context.AfterFunc(ctx, s.close)()
	ss.live()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("ingest: stream %s: %w", s.cfg.Stream, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("ingest: stream %s: %w", s.cfg.Stream, err)
		}
		seq := md.Sequence.Stream
		if err := ss.put(seq, msg.Data()); err != nil {
			return err
		}
		if s.cfg.Subject == "" {
			ss.in.noteLast(int64(seq + md.NumPending))
		} else {
			ss.in.noteLast(int64(seq))
		}
	}
}

func (s *jsSource) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil {
		s.nc.Close()
		s.nc, s.js = nil, nil
	}
}
