package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream names the target of a mirror to NATS JetStream.
type JetStream struct {
	// Conn is a connection to use; Run neither drains nor closes it.
	// When nil, the mirror connects to URLs with Options and closes the
	// connection when Run returns.
	Conn *nats.Conn
	// URLs is the comma-separated server URLs, as nats.Connect takes.
	URLs string
	// Options are passed to nats.Connect after the mirror's own
	// (nats.MaxReconnects(-1), nats.ReconnectWait(250 ms)), so they win:
	// credentials, TLS, names.
	Options []nats.Option
	// Stream is the stream, which must exist and be written by this
	// mirror alone (see the package documentation).
	Stream string
	// Subject is the subject the messages are published to, one the
	// stream takes.
	Subject string
}

// NewJetStream returns a mirror of the queue in cfg to a JetStream
// stream. Nothing connects before Run.
func NewJetStream(cfg Config, target JetStream) (*Mirror, error) {
	if target.Conn == nil && target.URLs == "" {
		return nil, fmt.Errorf("%w: JetStream needs Conn or URLs", ErrConfig)
	}
	if target.Stream == "" || target.Subject == "" {
		return nil, fmt.Errorf("%w: JetStream needs Stream and Subject", ErrConfig)
	}
	if strings.ContainsAny(target.Subject, "*> \t\r\n") {
		return nil, fmt.Errorf("%w: Subject %q is not a subject one can publish to", ErrConfig, target.Subject)
	}
	return newMirror(cfg, func(m *Mirror) (engine, error) {
		return &jsEngine{m: m, t: target}, nil
	})
}

// wrongLastID is how the server describes its refusal of a message whose
// expected last id is not the stream's (error code 10070).
const (
	errCodeWrongLastMsgID = 10070
	wrongLastIDPrefix     = "wrong last msg ID: "
)

type jsEngine struct {
	m *Mirror
	t JetStream

	nc *nats.Conn // ours, when t.Conn is nil
	// hint is the stream's last message id as the server named it when
	// it refused a message of the last session; nil when there was no
	// such refusal. It is set by that session's acknowledging goroutine,
	// which has exited when open reads it.
	hint *string
}

func (e *jsEngine) conn() (*nats.Conn, error) {
	if e.t.Conn != nil {
		return e.t.Conn, nil
	}
	if e.nc != nil && !e.nc.IsClosed() {
		return e.nc, nil
	}
	opts := append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(e.m.cfg.Timeout),
	}, e.t.Options...)
	nc, err := nats.Connect(e.t.URLs, opts...)
	if err != nil {
		return nil, fmt.Errorf("mirror: connect to %s: %w", e.t.URLs, err)
	}
	e.nc = nc
	return nc, nil
}

func (e *jsEngine) shutdown() {
	if e.nc != nil {
		e.nc.Close()
		e.nc = nil
	}
}

func (e *jsEngine) open(ctx context.Context, a *acker, fail context.CancelCauseFunc) (session, uint64, bool, error) {
	nc, err := e.conn()
	if err != nil {
		return nil, 0, false, err
	}
	// Our window is the limit: the library's own would stall publishes
	// and fail them after a while. Up to MaxInFlight+2 can be pending
	// there: the fifo's, the one the acknowledging goroutine waits for,
	// and the one send pushes.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(e.m.cfg.MaxInFlight+2))
	if err != nil {
		return nil, 0, false, fmt.Errorf("mirror: jetstream: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, e.m.cfg.Timeout)
	defer cancel()
	last, found, expect, err := e.resume(rctx, js)
	if err != nil {
		js.CleanupPublisher()
		return nil, 0, false, err
	}
	s := &jsSession{
		e:      e,
		js:     js,
		a:      a,
		fail:   fail,
		prefix: e.m.cfg.SourceID + ":",
		expect: expect,
		fifo:   make(chan pending, e.m.cfg.MaxInFlight),
		done:   make(chan struct{}),
		// No retry inside the library: a retried message would be sent
		// out of order (and read from the queue after send returned).
		opts: []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)},
	}
	s.msg.Subject = e.t.Subject
	s.msg.Header = nats.Header{
		jetstream.MsgIDHeader: {""},
		HeaderSource:          {e.m.cfg.SourceID},
		HeaderIndex:           {""},
	}
	s.expectHdr = []string{""}
	var kill context.Context
	kill, s.kill = context.WithCancel(context.Background())
	go s.acknowledge(kill)
	return s, last, found, nil
}

// resume finds the last message of the source the stream holds, and the
// id the next message must expect as the stream's last.
func (e *jsEngine) resume(ctx context.Context, js jetstream.JetStream) (last uint64, found bool, expect string, err error) {
	if h := e.hint; h != nil {
		e.hint = nil
		if *h != "" {
			idx, ok := e.parseID(*h)
			if !ok {
				return 0, false, "", fatal(fmt.Errorf("%w: stream %s's last message has id %q, not one of source %q", ErrStreamShared, e.t.Stream, *h, e.m.cfg.SourceID))
			}
			return idx, true, *h, nil
		}
		// The stream's last message has no id: the stream's messages
		// were all removed (then look for ours, and expect nothing of
		// the first), or someone else's came last.
		if err := e.checkLastIsOurs(ctx, js); err != nil {
			return 0, false, "", err
		}
		last, found, _, err = e.lastOnSubject(ctx, js)
		return last, found, "", err
	}
	return e.lastOnSubject(ctx, js)
}

// checkLastIsOurs returns ErrStreamShared if the stream's last message is
// not from this source.
func (e *jsEngine) checkLastIsOurs(ctx context.Context, js jetstream.JetStream) error {
	st, err := js.Stream(ctx, e.t.Stream)
	if err != nil {
		return fmt.Errorf("mirror: stream %s: %w", e.t.Stream, err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return nil
	}
	rm, err := st.GetMsg(ctx, state.LastSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mirror: last message of %s: %w", e.t.Stream, err)
	}
	if src := rm.Header.Get(HeaderSource); src != e.m.cfg.SourceID {
		return fatal(fmt.Errorf("%w: the last message of %s (sequence %d, subject %s) is from source %q, not %q", ErrStreamShared, e.t.Stream, rm.Sequence, rm.Subject, src, e.m.cfg.SourceID))
	}
	return nil
}

func (e *jsEngine) lastOnSubject(ctx context.Context, js jetstream.JetStream) (uint64, bool, string, error) {
	st, err := js.Stream(ctx, e.t.Stream)
	if err != nil {
		return 0, false, "", fmt.Errorf("mirror: stream %s: %w", e.t.Stream, err)
	}
	rm, err := st.GetLastMsgForSubject(ctx, e.t.Subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, "", nil
	}
	if err != nil {
		return 0, false, "", fmt.Errorf("mirror: last message of %s on %s: %w", e.t.Stream, e.t.Subject, err)
	}
	if src := rm.Header.Get(HeaderSource); src != e.m.cfg.SourceID {
		return 0, false, "", fatal(fmt.Errorf("%w: the last message on %s (sequence %d) is from source %q, not %q", ErrStreamShared, e.t.Subject, rm.Sequence, src, e.m.cfg.SourceID))
	}
	idx, err := strconv.ParseUint(rm.Header.Get(HeaderIndex), 10, 64)
	if err != nil {
		return 0, false, "", fatal(fmt.Errorf("%w: the last message on %s (sequence %d) has index header %q", ErrStreamShared, e.t.Subject, rm.Sequence, rm.Header.Get(HeaderIndex)))
	}
	return idx, true, rm.Header.Get(jetstream.MsgIDHeader), nil
}

// parseID returns the index in a message id of this source.
func (e *jsEngine) parseID(id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, e.m.cfg.SourceID+":")
	if !ok {
		return 0, false
	}
	idx, err := strconv.ParseUint(rest, 10, 64)
	return idx, err == nil
}

// pending is a message in flight.
type pending struct {
	idx uint64
	f   jetstream.PubAckFuture
}

type jsSession struct {
	e    *jsEngine
	js   jetstream.JetStream
	a    *acker
	fail context.CancelCauseFunc

	// The message and its headers are reused: the library writes them to
	// the connection's buffer before PublishMsgAsync returns, and reads
	// them again only to retry, which is disabled.
	msg       nats.Msg
	expectHdr []string
	idBuf     []byte
	prefix    string // SourceID + ":"
	expect    string // the id of the last message sent (or found)
	opts      []jetstream.PublishOpt

	fifo   chan pending // in publish order; its capacity is the window
	closed bool         // fifo closed
	kill   context.CancelFunc
	done   chan struct{} // closed when acknowledge returns
}

func (s *jsSession) send(ctx context.Context, idx uint64, payload []byte) error {
	s.idBuf = strconv.AppendUint(append(s.idBuf[:0], s.prefix...), idx, 10)
	id := string(s.idBuf)
	h := s.msg.Header
	h[jetstream.MsgIDHeader][0] = id
	h[HeaderIndex][0] = id[len(s.prefix):]
	if s.expect != "" {
		s.expectHdr[0] = s.expect
		h[jetstream.ExpectedLastMsgIDHeader] = s.expectHdr
	} else {
		delete(h, jetstream.ExpectedLastMsgIDHeader)
	}
	s.msg.Data = payload
	f, err := s.js.PublishMsgAsync(&s.msg, s.opts...)
	s.msg.Data = nil
	if err != nil {
		return fmt.Errorf("mirror: publish index %#x: %w", idx, err)
	}
	s.a.m.sent.Add(1)
	s.expect = id
	select {
	case s.fifo <- pending{idx, f}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (s *jsSession) idle(context.Context) error { return nil }

// acknowledge takes the acknowledgements in publish order and records
// them, until the fifo is closed and empty (a clean stop), kill, or the
// first error, which ends the session.
func (s *jsSession) acknowledge(kill context.Context) {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var p pending
		select {
		case p2, ok := <-s.fifo:
			if !ok {
				return
			}
			p = p2
		case <-kill.Done():
			return
		}
		ack, err := s.wait(kill, p, timer)
		if err != nil {
			if kill.Err() == nil {
				s.fail(err)
			}
			return
		}
		if ack.Duplicate {
			s.e.m.dups.Add(1)
		}
		if err := s.a.through(p.idx); err != nil {
			s.fail(err)
			return
		}
	}
}

func (s *jsSession) wait(kill context.Context, p pending, timer *time.Timer) (*jetstream.PubAck, error) {
	okc, errc := p.f.Ok(), p.f.Err()
	select {
	case ack := <-okc:
		return ack, nil
	case err := <-errc:
		return nil, s.refused(p.idx, err)
	default:
	}
	timer.Reset(s.e.m.cfg.Timeout)
	defer timer.Stop()
	select {
	case ack := <-okc:
		return ack, nil
	case err := <-errc:
		return nil, s.refused(p.idx, err)
	case <-timer.C:
		return nil, fmt.Errorf("%w: no acknowledgement of index %#x within %v", ErrTimeout, p.idx, s.e.m.cfg.Timeout)
	case <-kill.Done():
		return nil, kill.Err()
	}
}

// refused wraps the error of a publish, and keeps the stream's last id
// when the server named it.
func (s *jsSession) refused(idx uint64, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLastMsgID {
		if last, ok := strings.CutPrefix(apiErr.Description, wrongLastIDPrefix); ok {
			s.e.hint = &last
			if last != "" {
				if _, ours := s.e.parseID(last); !ours {
					return fatal(fmt.Errorf("%w: stream %s's last message has id %q, not one of source %q", ErrStreamShared, s.e.t.Stream, last, s.e.m.cfg.SourceID))
				}
			}
		}
	}
	return fmt.Errorf("mirror: publish index %#x: %w", idx, err)
}

func (s *jsSession) finish() error {
	if !s.closed {
		s.closed = true
		close(s.fifo)
	}
	t := time.NewTimer(s.e.m.cfg.Timeout)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
	}
	return nil
}

// close ends the session. It first waits (up to Config.Timeout) until
// the server has answered for every message sent: after a failure, the
// next session's messages would otherwise queue behind this one's, time
// out in turn and be sent again, on and on, while a slow server falls
// further behind.
func (s *jsSession) close() {
	s.kill()
	<-s.done
	t := time.NewTimer(s.e.m.cfg.Timeout)
	defer t.Stop()
	select {
	case <-s.js.PublishAsyncComplete():
	case <-t.C:
	}
	s.js.CleanupPublisher()
}
