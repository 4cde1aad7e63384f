package mirror

import (
	"context"
	"encoding/json"
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

type jsEngine struct {
	m *Mirror
	t JetStream

	nc *nats.Conn // ours, when t.Conn is nil
	// hint is the stream's last sequence as the server named it when it
	// refused a message of the last session for a wrong expected last
	// sequence; 0 when there was no such refusal. It is set by that
	// session's acknowledging goroutine, which has exited when open
	// reads it.
	hint uint64
}

// The server refuses a message whose expected last sequence is not the
// stream's with this error code, and names the stream's last sequence in
// the description.
const (
	errCodeWrongLastSeq = 10071
	wrongLastSeqPrefix  = "wrong last sequence: "
)

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
	last, found, lastSeq, err := e.resume(rctx, js)
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
		expect: lastSeq,
		fifo:   make(chan pending, e.m.cfg.MaxInFlight),
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
		// No retry inside the library: a retried message would be sent
		// out of order (and read from the queue after send returned).
		opts: []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)},
	}
	s.msg.Subject = e.t.Subject
	s.msg.Header = nats.Header{
		jetstream.MsgIDHeader:           {""},
		HeaderSource:                    {e.m.cfg.SourceID},
		HeaderIndex:                     {""},
		jetstream.ExpectedLastSeqHeader: {""},
	}
	var kill context.Context
	kill, s.kill = context.WithCancel(context.Background())
	go s.acknowledge(kill)
	return s, last, found, nil
}

// resume finds the last message of the source the stream holds, and the
// stream's last sequence, which the session's first message expects. It
// asks the stream's leader, not a replica that may lag (a direct get): a
// stale answer would have the mirror send again what the stream holds.
func (e *jsEngine) resume(ctx context.Context, js jetstream.JetStream) (last uint64, found bool, lastSeq uint64, err error) {
	st, err := js.Stream(ctx, e.t.Stream)
	if err != nil {
		return 0, false, 0, fmt.Errorf("mirror: stream %s: %w", e.t.Stream, err)
	}
	// The stream's last sequence: the one a refusal of the last session
	// named, when it is ahead of the stream information (the leader
	// counts the messages on their way too).
	lastSeq = max(st.CachedInfo().State.LastSeq, e.hint)
	e.hint = 0
	if lastSeq == 0 {
		return 0, false, 0, nil
	}
	rm, err := e.leaderGet(ctx, js, jsMsgGet{Seq: lastSeq})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// The stream's last message was removed (or all of them): ours
		// is the last on the subject, if any.
		rm, err = e.leaderGet(ctx, js, jsMsgGet{LastFor: e.t.Subject})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, false, lastSeq, nil
		}
	}
	if err != nil {
		return 0, false, 0, err
	}
	if src := rm.Header.Get(HeaderSource); src != e.m.cfg.SourceID {
		return 0, false, 0, fatal(fmt.Errorf("%w: its message %d (on %s) is from source %q, not %q", ErrStreamShared, rm.Sequence, rm.Subject, src, e.m.cfg.SourceID))
	}
	idx, err := strconv.ParseUint(rm.Header.Get(HeaderIndex), 10, 64)
	if err != nil {
		return 0, false, 0, fatal(fmt.Errorf("%w: its message %d (on %s) has index header %q", ErrStreamShared, rm.Sequence, rm.Subject, rm.Header.Get(HeaderIndex)))
	}
	return idx, true, lastSeq, nil
}

// jsMsgGet is the request of the JetStream API's STREAM.MSG.GET.
type jsMsgGet struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
}

// leaderGet gets a message from the stream's leader through the
// JetStream API (the client library would use a direct get, answered by
// any replica, when the stream allows them).
func (e *jsEngine) leaderGet(ctx context.Context, js jetstream.JetStream, req jsMsgGet) (*jetstream.RawStreamMsg, error) {
	prefix := js.Options().APIPrefix
	if d := js.Options().Domain; d != "" {
		prefix = "$JS." + d + ".API."
	}
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("message %d", req.Seq)
	if req.LastFor != "" {
		what = "last message on " + req.LastFor
	}
	reply, err := js.Conn().RequestWithContext(ctx, prefix+"STREAM.MSG.GET."+e.t.Stream, body)
	if err != nil {
		return nil, fmt.Errorf("mirror: get %s of %s: %w", what, e.t.Stream, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject  string `json:"subject"`
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("mirror: get %s of %s: %w", what, e.t.Stream, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, fmt.Errorf("mirror: get %s of %s: %w", what, e.t.Stream, resp.Error)
	}
	if resp.Message == nil {
		return nil, fmt.Errorf("mirror: get %s of %s: empty answer", what, e.t.Stream)
	}
	m := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("mirror: get %s of %s: headers: %w", what, e.t.Stream, err)
		}
	}
	return m, nil
}

// pending is a message in flight.
type pending struct {
	idx uint64
	seq uint64 // the stream sequence it must get
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
	msg    nats.Msg
	idBuf  []byte
	prefix string // SourceID + ":"
	expect uint64 // the stream's last sequence when the next message is stored
	opts   []jetstream.PublishOpt

	// The session's first message goes alone: the next ones are sent
	// once the stream has stored it where expected, which proves the
	// stream's last sequence the session started from.
	sent    bool          // the first message is sent
	probing bool          // and its acknowledgement not yet seen by send
	ready   chan struct{} // closed when it is acknowledged
	shift   uint64        // set before ready is closed: expect was one too many

	fifo   chan pending // in publish order; its capacity is the window
	closed bool         // fifo closed
	kill   context.CancelFunc
	done   chan struct{} // closed when acknowledge returns
}

func (s *jsSession) send(ctx context.Context, idx uint64, payload []byte) error {
	if s.probing {
		select {
		case <-s.ready:
			s.probing = false
			s.expect -= s.shift
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	s.idBuf = strconv.AppendUint(append(s.idBuf[:0], s.prefix...), idx, 10)
	id := string(s.idBuf)
	h := s.msg.Header
	h[jetstream.MsgIDHeader][0] = id
	h[HeaderIndex][0] = id[len(s.prefix):]
	h[jetstream.ExpectedLastSeqHeader][0] = strconv.FormatUint(s.expect, 10)
	s.msg.Data = payload
	f, err := s.js.PublishMsgAsync(&s.msg, s.opts...)
	s.msg.Data = nil
	if err != nil {
		return fmt.Errorf("mirror: publish index %#x: %w", idx, err)
	}
	s.a.m.sent.Add(1)
	s.expect++
	if !s.sent {
		s.sent, s.probing = true, true
	}
	select {
	case s.fifo <- pending{idx, s.expect, f}:
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
	first := true
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
		if first && ack.Duplicate && ack.Sequence < p.seq {
			// The first message is a copy of one the stream stored
			// before the sequence the session started from (and
			// perhaps lost since, an operator deleting it): it is
			// stored, and takes no place after that sequence.
			s.shift = 1
		} else if ack.Sequence != p.seq {
			// The stream holds the message elsewhere than where the
			// session counted (a copy stored earlier, found as a
			// duplicate): the next session starts again from what
			// the stream holds.
			s.fail(fmt.Errorf("mirror: index %#x stored as sequence %d of %s, not %d (duplicate: %v)", p.idx, ack.Sequence, s.e.t.Stream, p.seq, ack.Duplicate))
			return
		}
		if ack.Duplicate {
			s.e.m.dups.Add(1)
		}
		if err := s.a.through(p.idx); err != nil {
			s.fail(err)
			return
		}
		if first {
			first = false
			close(s.ready)
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

// refused wraps the error of a publish, and keeps the stream's last
// sequence when the server named it.
func (s *jsSession) refused(idx uint64, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeWrongLastSeq {
		if rest, ok := strings.CutPrefix(apiErr.Description, wrongLastSeqPrefix); ok {
			if seq, perr := strconv.ParseUint(rest, 10, 64); perr == nil {
				s.e.hint = seq
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
