package replica

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/values"
)

const (
	engineJetStream = "jetstream"
	engineKafka     = "kafka"
)

// Errors returned by replicas. Test for them with errors.Is; the errors
// returned wrap one of these (or one of offmap's or the engine client's)
// with the key, file or bucket involved.
var (
	// ErrNotFound: the key is absent (the same value as offmap.ErrNotFound).
	ErrNotFound = offmap.ErrNotFound
	// ErrNotReplica: the map file holds keys but no replica state, so it
	// was not made by a replica: Open refuses it rather than delete what
	// it holds (Config.TakeOver makes it a replica anyway). ReadState
	// returns it for a map with no state.
	ErrNotReplica = errors.New("replica: the map is not a replica")
	// ErrOtherSource: the map replicates another bucket or topic, or
	// another engine's (Config.TakeOver makes it replicate this one).
	ErrOtherSource = errors.New("replica: the map replicates another source")
	// ErrBusy: another process (or Replica) runs a replica of this map
	// file; two would undo each other's changes.
	ErrBusy = errors.New("replica: another replica has the map open")
	// ErrRunning: Run was called while it runs already.
	ErrRunning = errors.New("replica: Run is already running")
	// ErrClosed: the replica was closed.
	ErrClosed = errors.New("replica: closed")
	// ErrConflict: a compare-and-set found the key at another revision
	// than the one given (another writer came first).
	ErrConflict = errors.New("replica: the key is not at the expected revision")
	// ErrUnsupported: the engine has no such operation (Kafka has no
	// revisions, so no compare-and-set).
	ErrUnsupported = errors.New("replica: the engine does not support this operation")
	// ErrReservedKey: the key begins with StatePrefix, which the replica
	// keeps its own state under.
	ErrReservedKey = errors.New("replica: the key is reserved for the replica's state")
	// ErrInvalidKey: the engine does not accept the key (JetStream keys
	// are non-empty and made of letters, digits and -/_=.).
	ErrInvalidKey = errors.New("replica: the engine does not accept this key")
	// ErrApply: a change from the engine could not be stored in the map
	// (it is full, or the key or value is larger than the map allows).
	// Run stops with it rather than skip the change: the map would no
	// longer equal the source. Grow or re-create the map (offmap copy
	// --entries/--max-value), then run again: the replica resumes at the
	// change it could not apply.
	ErrApply = errors.New("replica: a change from the engine could not be applied to the map")
)

// errResync ends a session so that Run starts the next one at once, with
// a full resync (the state says so).
var errResync = errors.New("replica: resync needed")

// Config holds optional settings; the zero Config is ready to use.
type Config struct {
	// Resync makes the next Run start with a full resync: the map is made
	// equal to the engine's current state, and keys the engine no longer
	// holds are deleted. Runs resync on their own when they find the
	// history they would resume from gone; this is for what they cannot
	// see (see the package documentation).
	Resync bool
	// TakeOver lets Open take a map that holds keys but no replica state,
	// or the state of another source: its first Run makes it equal to the
	// source, deleting every other key.
	TakeOver bool
	// PollInterval is how often a running replica asks the engine for its
	// head, to report lag, to learn that it caught up, and to find
	// history removed under it. Zero means 1 s.
	PollInterval time.Duration
	// Timeout bounds each request to the engine. Zero means 10 s.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before Run tries to reach
	// the engine again after an error; it doubles from MinBackoff. Zero
	// means 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// Logf, if set, receives a line for each notable event: a resync, an
	// error reaching the engine, a reconnection.
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(5*time.Second, c.MinBackoff)
	}
}

// Progress is where a replica stands, for monitoring.
type Progress struct {
	// Engine is "jetstream" or "kafka"; Source the stream or topic.
	Engine, Source string
	// Applied is the engine revision up to which every change is applied:
	// for JetStream the stream sequence of the last change (the bucket's
	// revision numbers); for Kafka the sum over the partitions of the
	// next offset to apply.
	Applied uint64
	// Head is the engine's last revision the replica knows of (JetStream:
	// the stream's last sequence; Kafka: the sum of the partitions' last
	// stable offsets), learned with each change and each poll.
	Head uint64
	// Lag is Head - Applied: revisions (offsets) the engine holds that the
	// replica has not applied, as of Updated.
	Lag uint64
	// Updated is when Head was last learned.
	Updated time.Time
	// Keys is the number of replicated keys in the map.
	Keys int
	// CaughtUp is the last instant at which the replica had applied every
	// change the engine held (zero before the first): local reads reflect
	// the engine at least as of then.
	CaughtUp time.Time
	// Connected: the last request to the engine succeeded.
	Connected bool
	// Resyncing: a full resync is under way.
	Resyncing bool
	// Resyncs is the number of full resyncs this Replica completed.
	Resyncs int
	// Applies is the number of changes this Replica applied.
	Applies uint64
	// Err is the last error met reaching the engine, nil once it answers.
	Err error
}

// engine is what a replica needs from JetStream or Kafka.
type engine interface {
	name() string
	source() string
	// attach takes the position handles from r's map, after Open has
	// settled r.st.
	attach(r *Replica) error
	// session connects, catches up and applies changes until ctx is done
	// or an error; errResync asks for a new session at once.
	session(ctx context.Context, r *Replica) error
	put(ctx context.Context, key, value []byte) error
	del(ctx context.Context, key []byte) error
	entry(ctx context.Context, key []byte) ([]byte, uint64, error)
	update(ctx context.Context, key, value []byte, last uint64) (uint64, error)
	close()
}

// Replica is a local offmap map kept equal to a JetStream key-value
// bucket or a compacted Kafka topic. Its methods are safe for concurrent
// use; Run applies the engine's changes, while Get and the other reads
// read the map at memory speed and Put and the other writes go to the
// engine.
type Replica struct {
	m        *offmap.Map
	lock     *os.File
	eng      engine
	cfg      Config
	expiring bool

	// st is the persisted state; Open and then the Run goroutine own it.
	st State
	// stateKeys counts the map's entries that are replica state.
	stateKeys atomic.Int64

	running atomic.Bool
	pollNow chan struct{}

	mu       sync.Mutex
	closed   bool
	cancel   context.CancelFunc // of the running Run
	runDone  chan struct{}      // closed when the running Run returns
	prog     Progress
	caughtCh chan struct{} // closed (and replaced) when prog.CaughtUp advances
}

// open opens the map and settles the state for eng.
func open(path string, opts offmap.Options, eng engine, cfg Config) (*Replica, error) {
	cfg.defaults()
	// A new host has no directory for the map yet: make it, as
	// queue.Open makes a queue's.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		eng.close()
		return nil, fmt.Errorf("replica: %w", err)
	}
	lock, err := lockFile(path + ".replica-lock")
	if err != nil {
		eng.close()
		return nil, err
	}
	m, err := offmap.Open(path, opts)
	if err != nil {
		lock.Close()
		eng.close()
		return nil, fmt.Errorf("replica: %w", err)
	}
	r := &Replica{
		m: m, lock: lock, eng: eng, cfg: cfg,
		expiring: m.Stats().Expiring,
		pollNow:  make(chan struct{}, 1),
		caughtCh: make(chan struct{}),
	}
	r.prog.Engine, r.prog.Source = eng.name(), eng.source()
	if err := r.settle(); err != nil {
		r.closeAll()
		return nil, err
	}
	return r, nil
}

// settle reads the state in the map, or makes a new one, and attaches the
// engine's positions.
func (r *Replica) settle() error {
	fresh := State{Engine: r.eng.name(), Source: r.eng.source(), Resyncing: true}
	cur, err := ReadState(r.m)
	switch {
	case errors.Is(err, ErrNotReplica):
		if r.m.Len() > 0 && !r.cfg.TakeOver {
			return fmt.Errorf("%w: %s holds %d keys and no replica state (Config.TakeOver replaces them with the source's)", ErrNotReplica, r.m.Path(), r.m.Len())
		}
		r.st = fresh
	case err != nil && !r.cfg.TakeOver:
		return err
	case err != nil || cur.Engine != fresh.Engine || cur.Source != fresh.Source:
		if !r.cfg.TakeOver {
			return fmt.Errorf("%w: %s replicates %s %s, not %s %s (Config.TakeOver makes it replicate this one)", ErrOtherSource, r.m.Path(), cur.Engine, cur.Source, fresh.Engine, fresh.Source)
		}
		if err := r.dropState(); err != nil {
			return err
		}
		r.st = fresh
	default:
		r.st = cur
	}
	if r.cfg.Resync {
		r.st.Resyncing = true
	}
	if err := r.saveState(); err != nil {
		return err
	}
	r.stateKeys.Store(1)
	if err := r.eng.attach(r); err != nil {
		return err
	}
	r.mu.Lock()
	r.prog.Resyncing = r.st.Resyncing
	r.prog.Keys = r.keys()
	r.mu.Unlock()
	return nil
}

// dropState deletes the state keys of another source.
func (r *Replica) dropState() error {
	var keys [][]byte
	err := r.m.Range(func(k, _ []byte) bool {
		if IsStateKey(k) {
			keys = append(keys, append([]byte(nil), k...))
		}
		return true
	})
	for _, k := range keys {
		if err == nil {
			_, err = r.m.Delete(k)
		}
	}
	if err != nil {
		return fmt.Errorf("replica: dropping the old replica state of %s: %w", r.m.Path(), err)
	}
	return nil
}

// Close stops Run (if it runs, and waits for it to return) and closes
// the map and the engine's clients it made. The map file keeps the
// replica's state, for the next Open to resume from.
func (r *Replica) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	cancel, done := r.cancel, r.runDone
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return r.closeAll()
}

func (r *Replica) closeAll() error {
	r.eng.close()
	err := r.m.Close()
	r.lock.Close()
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	return nil
}

// Map returns the local map, for the reads Replica does not wrap
// (AppendValue with a reused buffer, ViewKeys, Stats). It also holds the
// replica's state keys (IsStateKey); do not write to it: the replica would
// not know, and the engine would not see the change.
func (r *Replica) Map() *offmap.Map { return r.m }

// Get returns a copy of key's value in the local map, or ErrNotFound. It
// never waits for the engine: it is offmap's Get.
func (r *Replica) Get(key []byte) ([]byte, error) {
	if len(key) > 0 && key[0] == 0 && IsStateKey(key) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return r.m.Get(key)
}

// AppendValue appends key's local value to dst, as offmap's AppendValue:
// with a reused buffer it reads without allocating.
func (r *Replica) AppendValue(dst, key []byte) ([]byte, error) {
	if len(key) > 0 && key[0] == 0 && IsStateKey(key) {
		return dst, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return r.m.AppendValue(dst, key)
}

// All yields every replicated key and its value in the local map (not the
// state keys), as offmap's All: the slices are valid only until the next
// step.
func (r *Replica) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		for k, v := range r.m.All() {
			if !IsStateKey(k) && !yield(k, v) {
				return
			}
		}
	}
}

// Len returns the number of replicated keys in the local map (in a map
// whose entries expire, also those expired and not yet swept).
func (r *Replica) Len() int { return r.keys() }

func (r *Replica) keys() int { return max(r.m.Len()-int(r.stateKeys.Load()), 0) }

// Put stores value under key in the engine: JetStream KV Put, or a Kafka
// record. The local map changes when the change comes back through the
// engine's stream (Sync waits for it), so that every replica applies the
// same changes in the engine's order.
func (r *Replica) Put(ctx context.Context, key, value []byte) error {
	if err := r.checkWrite(key); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // nil is a Kafka tombstone
	}
	return r.eng.put(ctx, key, value)
}

// Delete deletes key in the engine: a JetStream KV delete marker, or a
// Kafka tombstone (a record with a null value). Replicas delete it when
// the change reaches them.
func (r *Replica) Delete(ctx context.Context, key []byte) error {
	if err := r.checkWrite(key); err != nil {
		return err
	}
	return r.eng.del(ctx, key)
}

// Entry reads key's latest value and revision from the engine (not the
// local map), for Update. JetStream only: Kafka keeps no revision per key
// (ErrUnsupported). An absent or deleted key is ErrNotFound.
func (r *Replica) Entry(ctx context.Context, key []byte) (value []byte, revision uint64, err error) {
	if err := r.checkWrite(key); err != nil {
		return nil, 0, err
	}
	return r.eng.entry(ctx, key)
}

// Update stores value under key in the engine if key's latest revision
// is last (0: if key is absent or deleted), and returns the new revision;
// otherwise it returns ErrConflict and changes nothing. This is JetStream
// KV's Update (Create for 0): the engine checks the revision, so of two
// replicas that read the same revision and update, one fails. Kafka has
// no revisions: ErrUnsupported.
func (r *Replica) Update(ctx context.Context, key, value []byte, last uint64) (uint64, error) {
	if err := r.checkWrite(key); err != nil {
		return 0, err
	}
	if value == nil {
		value = []byte{}
	}
	return r.eng.update(ctx, key, value, last)
}

// CompareAndSwap sets key's value to new in the engine if key holds old
// there, and reports whether it did: Entry then Update, again while
// another writer's update comes between them. JetStream only.
func (r *Replica) CompareAndSwap(ctx context.Context, key, old, new []byte) (bool, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// Entry may be answered by a replica of the stream that lags
			// behind its leader: give it a moment.
			t := time.NewTimer(time.Duration(min(attempt, 50)) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, ctx.Err()
			case <-t.C:
			}
		}
		v, rev, err := r.Entry(ctx, key)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if string(v) != string(old) {
			return false, nil
		}
		_, err = r.Update(ctx, key, new, rev)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return err == nil, err
	}
}

func (r *Replica) checkWrite(key []byte) error {
	if IsStateKey(key) {
		return fmt.Errorf("%w: %q", ErrReservedKey, key)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return nil
}

// Progress returns where the replica stands.
func (r *Replica) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.prog
	p.Keys = r.keys()
	if p.Head > p.Applied {
		p.Lag = p.Head - p.Applied
	} else {
		p.Lag = 0
	}
	return p
}

// Sync waits until the replica has applied every change the engine held
// when Sync was called, so that a Put followed by Sync is then seen by
// Get (read your writes). It needs Run to be running; it returns ctx's
// error if ctx ends first.
func (r *Replica) Sync(ctx context.Context) error {
	start := time.Now()
	for {
		r.mu.Lock()
		done, ch, closed := !r.prog.CaughtUp.Before(start), r.caughtCh, r.closed
		r.mu.Unlock()
		if done {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case r.pollNow <- struct{}{}:
		default:
		}
		t := time.NewTimer(25 * time.Millisecond)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// Run applies the engine's changes to the map until ctx is done (it then
// returns nil) or an error that trying again cannot mend (ErrApply). It
// first catches up: from the position kept in the map, or with a full
// resync when there is none or the history after it is gone. When the
// engine cannot be reached, it tries again with back-off while local
// reads go on (Progress tells the lag and the error). Close stops it too.
func (r *Replica) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer r.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	done := make(chan struct{})
	r.cancel, r.runDone = cancel, done
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cancel, r.runDone = nil, nil
		r.prog.Connected = false
		r.mu.Unlock()
		close(done)
	}()

	backoff := r.cfg.MinBackoff
	for {
		started := time.Now()
		applies := r.Progress().Applies
		err := r.eng.session(ctx, r)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errResync) {
			r.logf("replica: %s %s: starting a full resync", r.eng.name(), r.eng.source())
			continue
		}
		if err == nil {
			err = errors.New("replica: the session ended")
		}
		if errors.Is(err, ErrApply) || errors.Is(err, offmap.ErrClosed) {
			r.noteErr(err)
			return err
		}
		r.noteErr(err)
		if r.Progress().Applies > applies || time.Since(started) > time.Minute {
			backoff = r.cfg.MinBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		r.logf("replica: %s %s: %v; trying again in %v", r.eng.name(), r.eng.source(), err, wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, r.cfg.MaxBackoff)
	}
}

func (r *Replica) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

// Helpers for the engines, called from the Run goroutine.

// reqCtx bounds one request to the engine.
func (r *Replica) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.Timeout)
}

func (r *Replica) noteErr(err error) {
	r.mu.Lock()
	r.prog.Connected = false
	r.prog.Err = err
	r.mu.Unlock()
}

func (r *Replica) noteConnected() {
	r.mu.Lock()
	again := !r.prog.Connected && r.prog.Err != nil
	r.prog.Connected = true
	r.prog.Err = nil
	r.mu.Unlock()
	if again {
		r.logf("replica: %s %s: reached the engine again", r.eng.name(), r.eng.source())
	}
}

// noteApplied records that the change at applied is in the map, and the
// engine's head as the change's delivery told it.
func (r *Replica) noteApplied(applied, head uint64) {
	r.mu.Lock()
	r.prog.Applied = applied
	r.prog.Applies++
	if head > r.prog.Head {
		r.prog.Head = head
	}
	r.mu.Unlock()
}

// notePosition sets the applied position without counting a change.
func (r *Replica) notePosition(applied uint64) {
	r.mu.Lock()
	r.prog.Applied = applied
	r.mu.Unlock()
}

// noteHead records the engine's head learned by a poll made at at, and
// whether every change it held then was applied.
func (r *Replica) noteHead(head uint64, at time.Time, caughtUp bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prog.Head = head
	r.prog.Updated = at
	r.prog.Connected = true
	r.prog.Err = nil
	if caughtUp && at.After(r.prog.CaughtUp) {
		r.prog.CaughtUp = at
		close(r.caughtCh)
		r.caughtCh = make(chan struct{})
	}
}

// pollRequested is the channel Sync pokes to have the engine polled now.
func (r *Replica) pollRequested() <-chan struct{} { return r.pollNow }

// putNever stores a value that never expires, in a map whose entries may.
func (r *Replica) putNever(key, value []byte) error {
	if r.expiring {
		return r.m.PutExpiring(key, value, time.Time{})
	}
	return r.m.Put(key, value)
}

// saveState stores r.st in the map.
func (r *Replica) saveState() error {
	b, err := encodeState(&r.st)
	if err == nil {
		err = r.putNever(stateKey, b)
	}
	if err != nil {
		return fmt.Errorf("replica: storing the replica state in %s: %w", r.m.Path(), err)
	}
	return nil
}

// position returns the handle on a position word, creating it (holding
// 0) if absent. Handles' entries never expire, also in a map whose entries
// may.
func (r *Replica) position(key []byte) (values.Uint64, error) {
	h, err := r.m.AcquireUint64(key)
	if err != nil {
		return h, fmt.Errorf("replica: the position %q in %s: %w", key, r.m.Path(), err)
	}
	r.stateKeys.Add(1)
	return h, nil
}

// applyPut stores a change; expires is when the engine expires it (zero:
// never), which a map whose entries may expire keeps.
func (r *Replica) applyPut(key, value []byte, expires time.Time) error {
	var err error
	if r.expiring {
		if !expires.IsZero() && !expires.After(time.Now()) {
			return r.applyDelete(key)
		}
		err = r.m.PutExpiring(key, value, expires)
	} else {
		err = r.m.Put(key, value)
	}
	return r.applyErr(key, err)
}

func (r *Replica) applyDelete(key []byte) error {
	_, err := r.m.Delete(key)
	return r.applyErr(key, err)
}

func (r *Replica) applyErr(key []byte, err error) error {
	if err == nil {
		return nil
	}
	if len(key) > 64 {
		key = append(key[:61:61], "..."...)
	}
	if errors.Is(err, offmap.ErrLockTimeout) || errors.Is(err, offmap.ErrClosed) {
		return fmt.Errorf("replica: applying a change of %q: %w", key, err)
	}
	return fmt.Errorf("%w: key %q: %w", ErrApply, key, err)
}

// deleteAllBut deletes every replicated key but keep (a stream rollup of
// all subjects: only its message is left).
func (r *Replica) deleteAllBut(keep []byte) error {
	return r.sweep(func(k []byte) bool { return string(k) == string(keep) })
}

// sweep deletes every replicated key for which keep is false.
func (r *Replica) sweep(keep func(k []byte) bool) error {
	var gone [][]byte
	err := r.m.Range(func(k, _ []byte) bool {
		if !IsStateKey(k) && !keep(k) {
			gone = append(gone, append([]byte(nil), k...))
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("replica: listing the keys of %s: %w", r.m.Path(), err)
	}
	for _, k := range gone {
		if err := r.applyDelete(k); err != nil {
			return err
		}
	}
	return nil
}

// beginResync records that a full resync begins, before any of its
// changes: a replica killed during it starts it over.
func (r *Replica) beginResync(incarnation string) error {
	r.st.Resyncing = true
	r.st.Incarnation = incarnation
	r.st.CaughtUp = time.Time{}
	r.mu.Lock()
	r.prog.Resyncing = true
	r.mu.Unlock()
	r.logf("replica: %s %s: full resync", r.eng.name(), r.eng.source())
	return r.saveState()
}

// finishResync deletes every key the resync did not see, then records
// that the map equals the source again.
func (r *Replica) finishResync(seen map[string]struct{}, caughtUp time.Time) error {
	if err := r.sweep(func(k []byte) bool { _, ok := seen[string(k)]; return ok }); err != nil {
		return err
	}
	r.st.Resyncing = false
	r.st.CaughtUp = caughtUp
	if err := r.saveState(); err != nil {
		return err
	}
	r.mu.Lock()
	r.prog.Resyncing = false
	r.prog.Resyncs++
	r.mu.Unlock()
	return nil
}

// requestResync records that the next session must resync, and returns
// errResync to end this one.
func (r *Replica) requestResync(why string) error {
	r.logf("replica: %s %s: %s", r.eng.name(), r.eng.source(), why)
	r.st.Resyncing = true
	if err := r.saveState(); err != nil {
		return err
	}
	return errResync
}
