package ingest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/offmap/offmap/queue"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors returned by New and Run. Test for them with errors.Is; the
// returned error wraps one of these with the queue, the source and the
// numbers involved.
var (
	// ErrConfig: the Config cannot describe an ingest (no source or two,
	// no queue, an empty stream or topic name, ...).
	ErrConfig = errors.New("ingest: invalid configuration")
	// ErrNoFrame: a message of the queue does not start with ingest's
	// frame: Split was given a foreign or damaged message, or New found
	// one as the queue's last message (something else appends to the
	// queue, so ingest cannot tell how far it got).
	ErrNoFrame = errors.New("ingest: message has no ingest frame")
	// ErrSourceMismatch: the queue's last message came from another
	// stream or partition than the configured one.
	ErrSourceMismatch = errors.New("ingest: queue was filled from another source")
	// ErrLocked: another ingest (in any process) writes to the queue.
	ErrLocked = errors.New("ingest: another ingest is writing to the queue")
	// ErrGap: the engine no longer holds messages that the queue lacks
	// (its retention removed them while ingest was behind or stopped).
	// Config.AllowGaps continues after them instead.
	ErrGap = errors.New("ingest: the engine no longer holds messages the queue lacks")
	// ErrSourceReset: the queue holds a later sequence or offset than
	// the engine's last: the stream or topic was deleted and created
	// again, or the queue was filled from another cluster. Ingest would
	// otherwise wait, silently, for the new source to pass the old one.
	ErrSourceReset = errors.New("ingest: the engine is behind the queue (stream or topic recreated?)")
	// ErrRunning: Run was called while another Run of the same Ingest
	// was running.
	ErrRunning = errors.New("ingest: already running")
	// ErrClosed: the Ingest was closed.
	ErrClosed = errors.New("ingest: closed")
)

// Config says where an ingest reads and where it writes. Exactly one of
// JetStream and Kafka is set, and one of Queue and Dir.
type Config struct {
	// Queue is the local queue to append to, opened by the caller, who
	// closes it after Close. Ingest must be its only appender.
	Queue *queue.Queue
	// Dir is the queue's directory when Queue is nil: New opens (and
	// creates) it with QueueOptions and Close closes it.
	Dir          string
	QueueOptions queue.Options

	JetStream *JetStream
	Kafka     *Kafka

	// AllowGaps makes Run go on after the engine lost messages that the
	// queue lacks (ErrGap otherwise): it logs the gap and continues from
	// the engine's first message.
	AllowGaps bool
	// RetryMin and RetryMax bound the back-off between attempts while
	// the engine is unreachable or failing: it starts at RetryMin and
	// doubles up to RetryMax, and starts over once messages flow again.
	// Zero means 100 ms and 5 s.
	RetryMin, RetryMax time.Duration
	// Logf, when set, is told about failed attempts, retries and gaps.
	Logf func(format string, args ...any)
}

// JetStream is a JetStream stream to ingest.
type JetStream struct {
	// URLs are the servers' client URLs, comma-separated, as
	// nats.Connect takes them.
	URLs string
	// Stream is the stream's name.
	Stream string
	// Subject, when set, is a filter: only the stream's messages on
	// matching subjects are ingested (their stream sequences then have
	// holes, and lag counts the other subjects' messages too).
	Subject string
	// Options are passed to nats.Connect after ingest's own
	// (nats.MaxReconnects(-1), a reconnect wait, a name), so they win:
	// credentials, TLS, nkeys, tokens, custom dialers.
	Options []nats.Option
}

// Kafka is one partition of a Kafka topic to ingest. A topic of N
// partitions takes N ingests into N queues (Kafka orders messages only
// within a partition). No consumer group is used: the queue itself
// records the offset reached, and the partition is read directly.
type Kafka struct {
	Seeds     []string // bootstrap brokers, host:port
	Topic     string
	Partition int32
	// Options are passed to kgo.NewClient after ingest's own, so they
	// win: TLS (kgo.DialTLSConfig), SASL (kgo.SASL), timeouts,
	// isolation level. Options that choose what to consume (topics,
	// groups, reset offsets) conflict with ingest's and must not be
	// given.
	Options []kgo.Opt
}

// Progress is a snapshot of an ingest's state. Sequences are JetStream
// stream sequences or Kafka offsets; "none" is one before the first a
// source can have: 0 for JetStream, -1 for Kafka, so that Last - Stored
// counts the messages behind in both.
type Progress struct {
	// Source names the stream or partition: "jetstream:NAME" or
	// "kafka:TOPIC/PARTITION".
	Source string
	// Stored is the sequence of the last message in the local queue.
	Stored int64
	// Last is the engine's last sequence as learned at Checked (by a
	// poll each second while Run runs, and from the messages received).
	Last int64
	// Checked is when the engine was last heard from; zero: never.
	Checked time.Time
	// Lag is Last - Stored (0 at least); -1 while Last is unknown.
	Lag int64
	// Appended counts the messages this Ingest appended.
	Appended uint64
	// Err is the last error met reaching the engine or appending, nil
	// once the engine answers again with a consumer running.
	Err error
}

// String formats p as one line, for logs and the offrepl progress line.
func (p Progress) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s stored %d", p.Source, p.Stored)
	if p.Checked.IsZero() {
		b.WriteString(", engine last unknown")
	} else {
		fmt.Fprintf(&b, ", engine last %d, lag %d", p.Last, p.Lag)
	}
	fmt.Fprintf(&b, ", appended %d", p.Appended)
	if p.Err != nil {
		fmt.Fprintf(&b, "; error: %v", p.Err)
	}
	return b.String()
}

// source is an engine's side: JetStream or Kafka.
type source interface {
	// none is the sequence before the first a source can have.
	none() int64
	// exact says whether sequences are contiguous but for deletions,
	// so that a jump at the start of a session can be a gap.
	exact() bool
	// jumpsMidSession says whether a jump later in a session can be a
	// gap too (retention passing a consumer that is behind), which
	// only a check of the engine's bounds tells from deleted messages.
	jumpsMidSession() bool
	// bounds returns the engine's first and last sequences now (an
	// empty source: first = last + 1).
	bounds(ctx context.Context) (first, last int64, err error)
	// consume delivers the engine's messages from sequence from on, in
	// order, to put, calling live once a consumer is receiving and
	// noteLast with what messages tell of the engine's last sequence,
	// until ctx is done or an error.
	consume(ctx context.Context, from int64, s *session) error
	// close releases the connections.
	close()
}

// Ingest copies one stream or partition into a local queue. Make it with
// New, then call Run; Progress may be called from any goroutine.
type Ingest struct {
	cfg      Config
	name     string
	tag      uint32
	src      source
	q        *queue.Queue
	ownQueue bool
	lock     *os.File

	running atomic.Bool
	closed  atomic.Bool

	stored   atomic.Int64 // hot path: the last sequence appended
	appended atomic.Uint64
	last     atomic.Int64
	checked  atomic.Int64 // Unix nanoseconds; 0: never

	mu      sync.Mutex
	sessErr error // what ended the last session; nil once one is live again
	pollErr error // what the last poll of the engine met
}

const lockName = ".ingest.lock"

// New checks cfg, opens the queue and takes its ingest lock, and reads
// from the queue's last message where ingest got to. It does not contact
// the engine: Run does, and keeps trying while the engine is
// unreachable.
func New(cfg Config) (*Ingest, error) {
	src, name, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 5 * time.Second
	}
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	in := &Ingest{cfg: cfg, name: name, tag: SourceTag(name), src: src, q: cfg.Queue}
	if in.q == nil {
		in.q, err = queue.Open(cfg.Dir, cfg.QueueOptions)
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		in.ownQueue = true
	}
	if in.lock, err = lockDir(in.q.Dir()); err != nil {
		in.closeQueue()
		return nil, err
	}
	stored, err := in.lastStored()
	if err != nil {
		in.Close()
		return nil, err
	}
	in.stored.Store(stored)
	in.last.Store(src.none())
	// Take the writer lease and fault in the pages the first appends
	// write now, rather than while the first messages wait.
	if err := in.q.Prepare(); err != nil {
		in.Close()
		return nil, fmt.Errorf("ingest: %w", err)
	}
	return in, nil
}

// check validates the configuration and returns its source and name.
func (cfg *Config) check() (source, string, error) {
	if (cfg.Queue == nil) == (cfg.Dir == "") {
		return nil, "", fmt.Errorf("%w: set one of Queue and Dir", ErrConfig)
	}
	if cfg.Queue != nil && cfg.Queue.ReadOnly() {
		return nil, "", fmt.Errorf("%w: the queue is open read-only", ErrConfig)
	}
	keep := cfg.QueueOptions.KeepCycles
	if cfg.Queue != nil {
		keep = cfg.Queue.KeepCycles()
	}
	if keep == 1 {
		// Right after a roll, the newest cycle may still be empty: with
		// the one before deleted, the queue would look empty and ingest
		// would start over from the engine's first message.
		return nil, "", fmt.Errorf("%w: the queue's KeepCycles must keep 2 cycles at least, so that the last stored message survives a roll", ErrConfig)
	}
	switch {
	case (cfg.JetStream == nil) == (cfg.Kafka == nil):
		return nil, "", fmt.Errorf("%w: set one of JetStream and Kafka", ErrConfig)
	case cfg.JetStream != nil:
		j := cfg.JetStream
		if j.URLs == "" {
			return nil, "", fmt.Errorf("%w: no JetStream server URLs", ErrConfig)
		}
		if j.Stream == "" || strings.ContainsAny(j.Stream, ".*> \t\r\n") {
			return nil, "", fmt.Errorf("%w: stream name %q", ErrConfig, j.Stream)
		}
		return newJetStream(j), jetStreamName(j.Stream), nil
	default:
		k := cfg.Kafka
		if len(k.Seeds) == 0 {
			return nil, "", fmt.Errorf("%w: no Kafka seed brokers", ErrConfig)
		}
		if k.Topic == "" || k.Partition < 0 {
			return nil, "", fmt.Errorf("%w: topic %q partition %d", ErrConfig, k.Topic, k.Partition)
		}
		return newKafka(k), kafkaName(k.Topic, k.Partition), nil
	}
}

// lockDir takes the queue's ingest lock: an flock on a dot file in its
// directory (the queue ignores dot files), released by the kernel when
// the process dies, so that a SIGKILLed ingest never blocks its
// successor while two live ones can never interleave appends.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("ingest: lock %s: %w", path, err)
	}
	return f, nil
}

// lastStored reads the sequence of the queue's last message: the queue
// is the only record of progress, so that it can never disagree with
// what the queue holds. A message that a killed ingest was writing is
// not complete, and Prev passes over it: it is fetched again.
func (in *Ingest) lastStored() (int64, error) {
	t, err := in.q.Tailer()
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	defer t.Close()
	if err := t.SeekEnd(); err != nil {
		return 0, fmt.Errorf("ingest: %s: %w", in.q.Dir(), err)
	}
	idx, msg, err := t.Prev()
	if errors.Is(err, queue.ErrNoMessage) {
		return in.src.none(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("ingest: %s: reading the last message: %w", in.q.Dir(), err)
	}
	f, _, err := Split(msg)
	if err != nil {
		return 0, fmt.Errorf("ingest: %s: last message %#x: %w (is something else appending to the queue?)", in.q.Dir(), idx, err)
	}
	if f.Source != in.tag {
		return 0, fmt.Errorf("%w: %s: last message %#x has source tag %#08x, %s has %#08x", ErrSourceMismatch, in.q.Dir(), idx, f.Source, in.name, in.tag)
	}
	return int64(f.Seq), nil
}

// Queue returns the queue ingest appends to, for local tailers.
func (in *Ingest) Queue() *queue.Queue { return in.q }

// Progress returns where the ingest is. It is cheap and safe to call from
// any goroutine, while Run runs or not.
func (in *Ingest) Progress() Progress {
	p := Progress{
		Source:   in.name,
		Stored:   in.stored.Load(),
		Last:     in.last.Load(),
		Appended: in.appended.Load(),
		Lag:      -1,
	}
	if c := in.checked.Load(); c != 0 {
		p.Checked = time.Unix(0, c)
		p.Lag = max(p.Last-p.Stored, 0)
	}
	in.mu.Lock()
	p.Err = in.pollErr
	if p.Err == nil {
		p.Err = in.sessErr
	}
	in.mu.Unlock()
	return p
}

// Run copies messages from the engine into the queue until ctx is done,
// then returns nil: a cancelled context is the way to stop, not an
// error. While the engine is unreachable, slow or restarting it retries
// with back-off (see Progress for the lag and the last error); local
// tailers go on reading what is stored. It returns an error only for
// what retrying cannot mend: ErrGap, ErrSourceReset, ErrNoFrame,
// ErrSourceMismatch, or a queue that refuses the message for good
// (queue.ErrTooLarge, queue.ErrClosed).
func (in *Ingest) Run(ctx context.Context) error {
	if in.closed.Load() {
		return ErrClosed
	}
	if !in.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer in.running.Store(false)
	defer in.src.close()
	pollCtx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { in.poll(pollCtx) })
	defer wg.Wait()
	defer stopPoll()

	retry := in.cfg.RetryMin
	for {
		before := in.appended.Load()
		err := in.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("ingest: the consumer stopped")
		}
		in.mu.Lock()
		in.sessErr = err
		in.mu.Unlock()
		if fatal(err) {
			return err
		}
		if in.appended.Load() != before {
			retry = in.cfg.RetryMin
		}
		wait := retry/2 + rand.N(retry/2+1) // jitter: restarted ingests do not retry in step
		in.logf("%v; retrying in %v", err, wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		retry = min(2*retry, in.cfg.RetryMax)
	}
}

// fatal tells the errors that retrying cannot mend.
func fatal(err error) bool {
	for _, e := range []error{ErrGap, ErrSourceReset, ErrNoFrame, ErrSourceMismatch, ErrConfig,
		queue.ErrTooLarge, queue.ErrClosed, queue.ErrReadOnly, queue.ErrCorrupt} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// session is one attempt: from the queue's last message, check the
// engine's bounds, then consume until an error.
type session struct {
	in    *Ingest
	next  int64 // the sequence expected next; a jump may be a gap
	check bool  // check a jump at the next message against the bounds
	ctx   context.Context
}

func (in *Ingest) session(ctx context.Context) error {
	stored, err := in.lastStored()
	if err != nil {
		return err
	}
	in.stored.Store(stored)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	first, last, err := in.src.bounds(bctx)
	cancel()
	if err != nil {
		return err
	}
	in.last.Store(last) // the truth of the moment, even lower (a recreated stream)
	in.checked.Store(time.Now().UnixNano())
	none := in.src.none()
	from := stored + 1
	switch {
	case stored == none:
		from = max(first, none+1) // a new queue starts at the engine's first message
	case stored > last:
		return fmt.Errorf("%w: %s: the queue holds %d, the engine's last is %d", ErrSourceReset, in.name, stored, last)
	case first > from && in.src.exact():
		if err := in.gap(from, first); err != nil {
			return err
		}
		from = first
	}
	s := &session{in: in, next: from, check: stored != none && in.src.exact(), ctx: ctx}
	return in.src.consume(ctx, from, s)
}

// gap reports that the engine lost [from, first): an error, or a log
// line with AllowGaps.
func (in *Ingest) gap(from, first int64) error {
	err := fmt.Errorf("%w: %s: the queue needs %d next, the engine's first is %d", ErrGap, in.name, from, first)
	if !in.cfg.AllowGaps {
		return err
	}
	in.logf("ingest: %v; AllowGaps: continuing from %d", err, first)
	return nil
}

// live marks the session's consumer as started: the error that ended the
// previous session is over.
func (s *session) live() {
	s.in.mu.Lock()
	s.in.sessErr = nil
	s.in.mu.Unlock()
}

// put appends one engine message, framed, to the queue. It is the hot
// path: one reservation, one copy of the payload, one commit.
func (s *session) put(seq uint64, data []byte) error {
	in := s.in
	if int64(seq) <= in.stored.Load() {
		return nil // already stored: never twice (engines do not resend, but cost nothing to guard)
	}
	if s.check && int64(seq) != s.next {
		// A jump: deleted messages (no loss), or retention removed them
		// before they were delivered (after the session's check of the
		// bounds, or while the consumer was behind). Retention removes
		// from the front: it did if the engine's first is past them.
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		first, _, err := in.src.bounds(ctx)
		cancel()
		if err != nil {
			return err
		}
		if first > s.next {
			if err := in.gap(s.next, first); err != nil {
				return err
			}
		}
	}
	s.check = in.src.jumpsMidSession()
	s.next = int64(seq) + 1
	for attempt := 0; ; attempt++ {
		w, err := in.q.Reserve(FrameSize + len(data))
		if err != nil {
			return fmt.Errorf("ingest: %s: appending %d to %s: %w", in.name, seq, in.q.Dir(), err)
		}
		b := w.Bytes()
		putFrame(b, Frame{Seq: seq, Source: in.tag})
		copy(b[FrameSize:], data)
		_, err = w.Commit()
		if err == nil {
			break
		}
		// ErrAbandoned: a reader judged this process dead (it cannot see
		// it, from another PID namespace) and skipped the slot: the
		// message is in no reader's view, so appending it again is
		// neither a gap nor a duplicate.
		if !errors.Is(err, queue.ErrAbandoned) || attempt == 2 {
			return fmt.Errorf("ingest: %s: committing %d to %s: %w", in.name, seq, in.q.Dir(), err)
		}
	}
	in.stored.Store(int64(seq))
	in.appended.Add(1)
	return nil
}

// noteLast records what the engine told of its last sequence.
func (in *Ingest) noteLast(last int64) {
	for old := in.last.Load(); last > old; old = in.last.Load() {
		if in.last.CompareAndSwap(old, last) {
			break
		}
	}
	in.checked.Store(time.Now().UnixNano())
}

// pollEvery is how often Run asks the engine for its last sequence, so
// that Progress shows the lag while no message arrives (a stalled
// consumer, an unreachable engine).
const pollEvery = time.Second

func (in *Ingest) poll(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, pollEvery*5)
		_, last, err := in.src.bounds(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			// The engine's last can go down (a stream recreated): a
			// poll's answer is the truth of the moment.
			in.last.Store(last)
			in.checked.Store(time.Now().UnixNano())
		}
		in.mu.Lock()
		in.pollErr = err
		in.mu.Unlock()
	}
}

func (in *Ingest) logf(format string, args ...any) {
	if in.cfg.Logf != nil {
		in.cfg.Logf(format, args...)
	}
}

// Close releases the queue's ingest lock and closes the queue if New
// opened it. Run must have returned.
func (in *Ingest) Close() error {
	if in.running.Load() {
		return fmt.Errorf("ingest: Close while Run runs")
	}
	if !in.closed.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if in.lock != nil {
		err = in.lock.Close() // releases the flock
	}
	if qerr := in.closeQueue(); err == nil {
		err = qerr
	}
	return err
}

func (in *Ingest) closeQueue() error {
	if !in.ownQueue {
		return nil
	}
	if err := in.q.Close(); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}
