package mirror

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/offmap/offmap/queue"
)

// The headers every mirrored message carries (JetStream headers, Kafka
// record headers), with text values.
const (
	// HeaderSource is Config.SourceID: which queue the message comes from.
	HeaderSource = "Offmap-Source"
	// HeaderIndex is the message's queue index, in decimal. Within one
	// source the engine holds indexes in increasing order.
	HeaderIndex = "Offmap-Index"
)

// Errors of the mirror. Run returns those that retrying cannot cure;
// Progress reports the others, which Run retries.
var (
	// ErrConfig: the configuration cannot work (a field missing or out of
	// range).
	ErrConfig = errors.New("mirror: invalid configuration")
	// ErrRunning: Run was called while the same Mirror runs.
	ErrRunning = errors.New("mirror: already running")
	// ErrLocked: another mirror with the same tailer name runs on the
	// queue.
	ErrLocked = errors.New("mirror: another mirror runs with this tailer name")
	// ErrStreamShared: the JetStream stream holds a last message that is
	// not from this source, so the order of its messages cannot be kept
	// (the stream must be written by this mirror alone; see the package
	// documentation).
	ErrStreamShared = errors.New("mirror: stream is written by someone else")
	// ErrEngineAhead: the engine holds a message of this source with an
	// index past the queue's last message: the queue lost messages (a
	// power loss), or was recreated, or another queue uses this SourceID.
	ErrEngineAhead = errors.New("mirror: engine holds messages past the end of the queue")
	// ErrTimeout: the engine did not acknowledge a message, or answer a
	// request, within Config.Timeout. Run retries.
	ErrTimeout = errors.New("mirror: engine did not answer in time")
)

// Config says which queue to mirror and how; the engine is given to
// NewJetStream or NewKafka.
type Config struct {
	// Queue is the queue to mirror, opened by the caller, who closes it
	// after Run returns.
	Queue *queue.Queue
	// Dir is the queue's directory, used when Queue is nil: Run opens the
	// queue (creating it if needed) and closes it when it returns.
	Dir string
	// TailerName names the queue's named tailer that records what the
	// engine acknowledged (1 to 48 bytes). Default "mirror".
	TailerName string
	// SourceID identifies the queue at the engine: every message carries
	// it, and each session looks for the engine's last message carrying
	// it to know where to resume. Required. Keep it stable across restarts
	// (a new one is a new source, starting where the tailer is) and unique
	// among the queues mirrored into one target.
	SourceID string
	// MaxInFlight bounds the messages sent and not yet acknowledged by
	// the engine (for Kafka, the records of one transaction, which also
	// ends at 16 MiB of payloads). Default 8192.
	MaxInFlight int
	// Timeout bounds each wait on the engine: for the acknowledgement of
	// the oldest message in flight, for a request, for a commit, and for
	// the acknowledgements still due when Run stops. When it passes, the
	// session ends and Run starts another. Default 10 s.
	Timeout time.Duration
	// RetryMin and RetryMax bound the pause between a failed session and
	// the next: it starts at RetryMin, doubles after each failure up to
	// RetryMax, and starts again from RetryMin after a session that
	// acknowledged messages. Defaults 100 ms and 5 s.
	RetryMin, RetryMax time.Duration
	// OnError, when set, is called with each error that ended a session
	// (Run then retries). It runs on Run's goroutine and must not block.
	OnError func(error)
}

// Progress is a snapshot of a mirror's work since Run started.
type Progress struct {
	Sent       uint64 // messages published, resends after a failed session included
	Acked      uint64 // messages acknowledged by the engine and recorded in the tailer
	Duplicates uint64 // publishes the engine recognised as already stored (JetStream)
	Restarts   uint64 // sessions that ended in an error and were followed by another

	// Next is the index of the first message the engine has not
	// acknowledged yet: the named tailer's position (valid when Known).
	Next  uint64
	Known bool
	// Last is the index of the queue's last message (valid when Lag > 0).
	Last uint64
	// Lag is the number of messages in the queue from Next to Last:
	// appended and not yet acknowledged by the engine (slots skipped
	// after a writer died count too), counted by Queue.Count across cycle
	// files (those retention deleted count nothing). Zero when the mirror
	// is idle or not running; -1 when it could not be computed.
	Lag int64
	// Err is the error that ended the last session, nil once a later
	// session has had messages acknowledged.
	Err error
}

// Mirror copies a queue to an engine; see the package documentation.
type Mirror struct {
	cfg Config
	eng engine

	running atomic.Bool

	qmu sync.RWMutex // guards q against Run closing it under Progress
	q   *queue.Queue

	sent, acked, dups, restarts atomic.Uint64
	next                        atomic.Uint64
	known                       atomic.Bool
	errMu                       sync.Mutex
	err                         error
}

// engine is one kind of target. open starts a session: it connects (or
// reuses a connection) and asks the engine for the last message of the
// source it holds.
type engine interface {
	open(ctx context.Context, a *acker, fail context.CancelCauseFunc) (s session, last uint64, found bool, err error)
	// shutdown releases what the engine kept across sessions.
	shutdown()
}

// session is one connection's worth of work, ended by its first error.
type session interface {
	// send publishes one message asynchronously, counting it in
	// Mirror.sent once it is on its way. payload is a view into the
	// queue that send must not keep after it returns.
	send(ctx context.Context, idx uint64, payload []byte) error
	// idle says the queue has nothing more to read for now.
	idle(ctx context.Context) error
	// finish waits, up to Config.Timeout, for the acknowledgement of what
	// was sent, recording it; Run calls it when it stops.
	finish() error
	// close ends the session, abandoning what is still in flight.
	close()
}

func newMirror(cfg Config, eng func(*Mirror) (engine, error)) (*Mirror, error) {
	if cfg.Queue == nil && cfg.Dir == "" {
		return nil, fmt.Errorf("%w: neither Queue nor Dir", ErrConfig)
	}
	if cfg.SourceID == "" {
		return nil, fmt.Errorf("%w: no SourceID", ErrConfig)
	}
	if strings.IndexFunc(cfg.SourceID, unicode.IsControl) >= 0 {
		return nil, fmt.Errorf("%w: SourceID %q has control characters (it goes in headers)", ErrConfig, cfg.SourceID)
	}
	if cfg.TailerName == "" {
		cfg.TailerName = "mirror"
	}
	if len(cfg.TailerName) > 48 {
		return nil, fmt.Errorf("%w: TailerName of %d bytes (1 to 48)", ErrConfig, len(cfg.TailerName))
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 8192
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.RetryMin == 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 5 * time.Second
	}
	if cfg.MaxInFlight < 1 || cfg.Timeout < 0 || cfg.RetryMin < 0 || cfg.RetryMax < cfg.RetryMin {
		return nil, fmt.Errorf("%w: MaxInFlight %d, Timeout %v, RetryMin %v, RetryMax %v", ErrConfig, cfg.MaxInFlight, cfg.Timeout, cfg.RetryMin, cfg.RetryMax)
	}
	m := &Mirror{cfg: cfg}
	e, err := eng(m)
	if err != nil {
		return nil, err
	}
	m.eng = e
	return m, nil
}

// Run mirrors the queue until ctx is done, then waits (up to
// Config.Timeout) for the acknowledgements of what it sent, records them
// and returns nil. It returns an error only for what retrying cannot cure
// (see the package documentation); engine errors end a session, which Run
// reports through Progress and Config.OnError before starting another.
func (m *Mirror) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer m.running.Store(false)
	defer m.eng.shutdown()
	q := m.cfg.Queue
	if q == nil {
		var err error
		if q, err = queue.Open(m.cfg.Dir, queue.Options{}); err != nil {
			return fmt.Errorf("mirror: open queue: %w", err)
		}
		defer q.Close()
	}
	unlock, err := lockTailer(q.Dir(), m.cfg.TailerName)
	if err != nil {
		return err
	}
	defer unlock()
	m.qmu.Lock()
	m.q = q
	m.qmu.Unlock()
	defer func() {
		m.qmu.Lock()
		m.q = nil
		m.qmu.Unlock()
	}()

	pause := m.cfg.RetryMin
	for {
		progressed, err := m.session(ctx, q)
		if fe := (*fatalError)(nil); errors.As(err, &fe) {
			return fe.err
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil { // cannot happen: a session ends in an error or with ctx
			err = errors.New("mirror: session ended")
		}
		m.restarts.Add(1)
		m.setErr(err)
		if m.cfg.OnError != nil {
			m.cfg.OnError(err)
		}
		if progressed {
			pause = m.cfg.RetryMin
		}
		// Jitter spreads the reconnections of many mirrors.
		wait := pause/2 + rand.N(pause/2+1)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		pause = min(2*pause, m.cfg.RetryMax)
	}
}

// session runs one session: resume, then read, send and acknowledge until
// an error or ctx. It reports whether messages were acknowledged.
func (m *Mirror) session(ctx context.Context, q *queue.Queue) (progressed bool, err error) {
	ackT, err := q.NamedTailer(m.cfg.TailerName)
	if err != nil {
		return false, fatal(fmt.Errorf("mirror: named tailer %q: %w", m.cfg.TailerName, err))
	}
	defer ackT.Close()
	a := &acker{m: m, t: ackT}
	m.next.Store(ackT.Index())
	m.known.Store(true)

	sctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	s, last, found, err := m.eng.open(sctx, a, fail)
	if err != nil {
		return false, err
	}
	defer s.close()
	if found {
		// The engine holds everything up to last: skip it.
		if qlast, err := q.LastIndex(); err != nil && !errors.Is(err, queue.ErrNoMessage) {
			return false, fatal(fmt.Errorf("mirror: last index of the queue: %w", err))
		} else if err != nil || last > qlast {
			return false, fatal(fmt.Errorf("%w: engine has index %#x of source %q, queue ends at %#x", ErrEngineAhead, last, m.cfg.SourceID, qlast))
		}
		if err := a.through(last); err != nil {
			return false, err
		}
	}
	rd, err := q.NamedTailer(m.cfg.TailerName) // after what is acknowledged
	if err != nil {
		return a.progressed(), fatal(fmt.Errorf("mirror: named tailer %q: %w", m.cfg.TailerName, err))
	}
	defer rd.Close()

	done := sctx.Done()
	for {
		select {
		case <-done:
			return m.endSession(ctx, sctx, s, a, nil)
		default:
		}
		idx, msg, err := rd.Next()
		if err == nil {
			if err := s.send(sctx, idx, msg); err != nil {
				return m.endSession(ctx, sctx, s, a, err)
			}
			continue
		}
		if !errors.Is(err, queue.ErrNoMessage) {
			return a.progressed(), fatal(fmt.Errorf("mirror: read queue: %w", err))
		}
		if err := s.idle(sctx); err != nil {
			return m.endSession(ctx, sctx, s, a, err)
		}
		if err := rd.Wait(sctx, queue.Block); err != nil && sctx.Err() == nil {
			return a.progressed(), fatal(fmt.Errorf("mirror: wait on queue: %w", err))
		}
	}
}

// endSession ends a session that met err or whose context is done: a
// clean stop when ctx is done (what was sent is waited for and
// recorded), an error otherwise.
func (m *Mirror) endSession(ctx, sctx context.Context, s session, a *acker, err error) (bool, error) {
	if ctx.Err() != nil {
		if ferr := s.finish(); ferr != nil {
			if fe := (*fatalError)(nil); errors.As(ferr, &fe) {
				return a.progressed(), ferr
			}
		}
		return a.progressed(), nil
	}
	if cause := context.Cause(sctx); sctx.Err() != nil && cause != nil {
		err = cause // the first error of the session, from its acknowledgements
	}
	return a.progressed(), err
}

// Progress returns a snapshot of the mirror's work. It may be called from
// any goroutine, while Run runs or not; it reads the queue's last index
// and counts the lag with Queue.Count.
func (m *Mirror) Progress() Progress {
	p := Progress{
		Sent:       m.sent.Load(),
		Acked:      m.acked.Load(),
		Duplicates: m.dups.Load(),
		Restarts:   m.restarts.Load(),
		Next:       m.next.Load(),
		Known:      m.known.Load(),
	}
	m.errMu.Lock()
	p.Err = m.err
	m.errMu.Unlock()
	m.qmu.RLock()
	defer m.qmu.RUnlock()
	if m.q == nil || !p.Known {
		return p
	}
	last, err := m.q.LastIndex()
	if errors.Is(err, queue.ErrNoMessage) {
		return p
	}
	if err != nil {
		p.Lag = -1
		return p
	}
	p.Last = last
	if p.Lag, err = m.q.Count(p.Next, last+1); err != nil {
		p.Lag = -1
	}
	return p
}

func (m *Mirror) setErr(err error) {
	m.errMu.Lock()
	m.err = err
	m.errMu.Unlock()
}

// acker records in the named tailer what the engine acknowledged. One
// goroutine at a time uses it: the session's acknowledging goroutine.
type acker struct {
	m *Mirror
	t *queue.Tailer
	n atomic.Uint64 // messages acknowledged in this session
}

// through acknowledges every message up to and including idx: it moves
// the tailer past them (reading them again costs a header each) and
// records its position.
func (a *acker) through(idx uint64) error {
	n := uint64(0)
	for a.t.Index() <= idx {
		if _, _, err := a.t.Next(); err != nil {
			if errors.Is(err, queue.ErrNoMessage) {
				return fmt.Errorf("mirror: acknowledge through %#x: message %#x not ready", idx, a.t.Index())
			}
			return fatal(fmt.Errorf("mirror: acknowledge through %#x: %w", idx, err))
		}
		n++
	}
	if n == 0 {
		return nil
	}
	if err := a.t.Ack(); err != nil {
		return fatal(fmt.Errorf("mirror: acknowledge through %#x: %w", idx, err))
	}
	a.n.Add(n)
	a.m.acked.Add(n)
	a.m.next.Store(a.t.Index())
	if a.n.Load() == n { // the session's first: the engine answers again
		a.m.setErr(nil)
	}
	return nil
}

func (a *acker) progressed() bool { return a.n.Load() > 0 }

// fatalError marks an error that retrying cannot cure: Run returns it.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(err error) error { return &fatalError{err} }

// lockTailer takes an exclusive flock on dir/.mirror-<name>.lock, so that
// two mirrors never share a tailer; the kernel releases it when the
// process dies.
func lockTailer(dir, name string) (unlock func(), err error) {
	path := filepath.Join(dir, ".mirror-"+url.PathEscape(name)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mirror: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked", ErrLocked, path)
		}
		return nil, fmt.Errorf("mirror: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
