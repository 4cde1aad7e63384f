package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Writing is a message reserved in the mapped file: write its payload
// into Bytes, then Commit (or Abort). Until then readers wait at the slot
// (other appenders do not). Reserve, write and commit on one goroutine;
// a Writing must not be copied after use.
type Writing struct {
	c   *cycle
	off int64
	seq uint32
	hdr uint64
	buf []byte
}

// Append adds msg to the end of the queue and returns its index. It is
// safe for concurrent use by any number of goroutines and processes.
func (q *Queue) Append(msg []byte) (uint64, error) {
	w, err := q.Reserve(len(msg))
	if err != nil {
		return 0, err
	}
	copy(w.buf, msg)
	return w.Commit()
}

// Reserve claims room for an n-byte message at the end of the queue; the
// caller writes it through w.Bytes() and commits it. Messages reserved
// later by other appenders may be committed first, but readers see every
// message in index order.
func (q *Queue) Reserve(n int) (Writing, error) {
	if n < 0 || int64(n) > q.maxAppend {
		return Writing{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	for {
		c, err := q.appendCycle()
		if err != nil {
			return Writing{}, err
		}
		stored := n
		if q.checksums {
			stored += sumSize
		}
		seq, off, hdr, err := c.claim(stored, flagBusy, q.writerBits)
		switch {
		case err == errEOF:
			err = q.advance(c, 0)
			c.release()
			if err != nil {
				return Writing{}, err
			}
			continue
		case err != nil:
			c.release()
			return Writing{}, &shm.OpError{Pkg: "queue", Op: "append to", Path: q.cyclePath(c.num), Err: err}
		}
		if seq&(1<<q.spacing-1) == 0 {
			c.recordIndex(seq, off, q.writerBits)
		}
		p := off + 8 + int64(stored-n)
		return Writing{c: c, off: off, seq: seq, hdr: hdr, buf: c.mem()[p : p+int64(n) : p+int64(n)]}, nil
	}
}

// Prepare readies this process to append: it takes a writer lease, maps
// the current cycle file, creating it if needed, and faults in the block
// the next appends will write, work that the first appends would
// otherwise do (or wait for the background pretoucher to do) while a
// latency-sensitive caller waits. A process opening thousands of queues
// at once would otherwise start with all their first pages to fault in.
func (q *Queue) Prepare() error {
	if q.wcur.Load() == nil {
		if err := q.startAppending(); err != nil {
			return err
		}
	}
	if c := q.wcur.Load(); c != nil && c.tryRef() {
		c.pretouch()
		c.release()
	}
	return nil
}

// PrefetchAppend starts bringing in the memory the next append to this
// queue will write, without waiting for it: an event loop that serves many
// queues calls it for a queue it will serve soon, so that the cache and
// TLB misses of one overlap the work on another. It reads the queue's and
// its cycle's state to find where the next message goes; PrefetchState
// and PrefetchCycle, called a little earlier, bring those in.
func (q *Queue) PrefetchAppend() {
	shm.PrefetchWord(q.sleepers) // notify reads it after the append
	if c := q.wcur.Load(); c != nil {
		if _, off := unpackHint(c.local.Load()); off >= dataStart {
			shm.Prefetch(c.mem(), int(off))
		}
	}
}

// PrefetchState starts bringing in the queue's own state, ahead of a
// PrefetchCycle or an append. It reads nothing.
func (q *Queue) PrefetchState() {
	shm.PrefetchObject(q)
	shm.PrefetchObject(&q.wcur)
}

// PrefetchCycle starts bringing in the state of the cycle the next append
// goes to, ahead of a PrefetchAppend. It reads the queue's state.
func (q *Queue) PrefetchCycle() {
	if c := q.wcur.Load(); c != nil {
		shm.PrefetchObject(c)
	}
}

// Bytes returns the reserved payload, to be written before Commit.
func (w *Writing) Bytes() []byte { return w.buf }

// Index returns the index the message will have.
func (w *Writing) Index() uint64 { return Index(w.c.num, w.seq) }

// Commit publishes the message and returns its index.
func (w *Writing) Commit() (uint64, error) {
	c := w.c
	if c == nil {
		return 0, errors.New("queue: Commit of a Writing that is not reserved")
	}
	w.c = nil
	// Publish: clear not-complete. A CAS, not a plain store: a reader
	// that judged this writer dead (its lease lost, or its process not
	// visible from the reader's, as across PID namespaces) may have marked
	// the slot skipped, and readers that passed it went on. A store would
	// show the message to later readers only; the writer learns instead
	// that it is lost. (A reader of a queue opened read-only cannot mark
	// the slot: it steps over it alone, and the message stays for others.)
	q := c.q
	idx := Index(c.num, w.seq)
	if q.checksums {
		// Before the header's release: a reader that sees the message
		// complete sees its checksum.
		binary.LittleEndian.PutUint64(c.mem()[w.off+8:], messageSum(w.buf, idx))
	}
	ok := shm.U64(c.mem(), int(w.off)).CompareAndSwap(w.hdr, w.hdr&^flagBusy)
	c.release()
	if !ok && q.closed.Load() {
		return 0, fmt.Errorf("%w: index %d:%d was aborted by Close", ErrClosed, c.num, w.seq)
	}
	if !ok {
		return 0, fmt.Errorf("%w: index %d:%d was skipped by a reader that judged its writer dead", ErrAbandoned, c.num, w.seq)
	}
	q.notify()
	return idx, nil
}

// Abort gives the slot up: readers skip it. Its index is not reused.
func (w *Writing) Abort() {
	c := w.c
	if c == nil {
		return
	}
	w.c = nil
	ok := shm.U64(c.mem(), int(w.off)).CompareAndSwap(w.hdr, w.hdr&^flagBusy|flagSkipped)
	q := c.q
	c.release()
	if ok { // else a reader or Close skipped it already (after Close, q's words are unmapped)
		q.notify()
	}
}

// abortOutstanding marks skipped every slot this process reserved and has
// neither committed nor aborted, in the cycles still in use, and returns
// an ErrUncommitted naming them (nil if there were none). Close calls it.
func (q *Queue) abortOutstanding() error {
	if q.writerBits == 0 {
		return nil // never appended
	}
	q.mu.Lock()
	var used []*cycle
	for _, c := range q.cycles {
		if c.refs.Load() > 0 && c.writable {
			used = append(used, c)
		}
	}
	q.mu.Unlock()
	var aborted []string
	for _, c := range used {
		w := c.walkFrom(0, dataStart)
		for {
			h, err := w.header()
			if err != nil || h == 0 || h&flagEOF != 0 {
				break
			}
			if h&(flagBusy|flagMeta) == flagBusy && h&writerMask == q.writerBits &&
				shm.U64(w.mem, int(w.off)).CompareAndSwap(h, h&^flagBusy|flagSkipped) {
				aborted = append(aborted, fmt.Sprintf("%d:%d", c.num, w.seq))
			}
			if w.step(h) != nil {
				break
			}
		}
	}
	if len(aborted) == 0 {
		return nil
	}
	return fmt.Errorf("%w: Close aborted %d reservations (indexes %s)", ErrUncommitted, len(aborted), strings.Join(aborted, ", "))
}

// appendCycle returns the cycle to append to, with a reference, rolling
// the queue when the clock has passed the cycle's end.
func (q *Queue) appendCycle() (*cycle, error) {
	for {
		c := q.wcur.Load()
		if c == nil {
			if err := q.startAppending(); err != nil {
				return nil, err
			}
			continue
		}
		if q.rollDue() {
			if err := q.rollIfDue(c); err != nil {
				return nil, err
			}
		}
		if c.tryRef() {
			if q.wcur.Load() == c {
				return c, nil
			}
			c.release()
		}
	}
}

// rollDue reports whether the append cycle may have ended. Without a test
// clock it costs one atomic load: a timer raises the flag at the cycle's
// end (a millisecond or so late, which only delays the roll).
func (q *Queue) rollDue() bool {
	if q.clocked {
		return q.opts.clock().UnixNano() >= q.rollAt.Load()
	}
	return q.rollFlag.Load()
}

func (q *Queue) wallNow() time.Time {
	if q.opts.clock != nil {
		return q.opts.clock()
	}
	return time.Now()
}

// setCycle makes c the append cycle (taking over the caller's reference)
// and arms the roll for its end.
func (q *Queue) setCycle(c *cycle) {
	q.armRoll(q.cycleStart(c.num + 1))
	if old := q.wcur.Swap(c); old != nil {
		old.release()
	}
}

// armRoll makes rollDue true from time end on.
func (q *Queue) armRoll(end time.Time) {
	if q.opts.clock != nil {
		q.rollAt.Store(end.UnixNano())
		return
	}
	d := time.Until(end)
	if d <= 0 {
		// Already due (a process attaching to a cycle whose time is up):
		// at once, not when a timer goroutine gets to run, so that its
		// first append goes to the cycle of the clock.
		q.rollFlag.Store(true)
		return
	}
	q.rollFlag.Store(false)
	if q.rollTimer == nil {
		q.rollTimer = time.AfterFunc(d, func() { q.rollFlag.Store(true) })
	} else {
		q.rollTimer.Reset(d)
	}
}

// startAppending takes a writer lease and attaches to the latest cycle,
// sealing the one before it if a roller died before doing so. The first
// cycle of an empty queue is created under the metadata lock, so that
// processes starting together agree on it; later cycles come from rolls.
func (q *Queue) startAppending() error {
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	if q.closed.Load() {
		return ErrClosed
	}
	if q.readOnly {
		return ErrReadOnly
	}
	if q.wcur.Load() != nil {
		return nil
	}
	if err := q.takeLease(); err != nil {
		return err
	}
	if q.latest.Load() == 0 {
		if err := q.createFirstCycle(); err != nil {
			return err
		}
	}
	return q.attachLatest()
}

// attachLatest makes the latest cycle the append cycle, first sealing the
// one before it in case its roller died before doing so. The caller holds
// appendMu.
func (q *Queue) attachLatest() error {
	c, n, err := q.acquireLatest()
	if err != nil {
		return &shm.OpError{Pkg: "queue", Op: "open the latest cycle", Path: q.cyclePath(n), Err: err}
	}
	if c.prev != 0 {
		if err := q.sealCycle(uint32(c.prev - 1)); err != nil {
			c.release()
			return err
		}
	}
	q.setCycle(c)
	return nil
}

// acquireLatest maps the latest cycle, which exists (latest is not 0),
// and returns it with its number. The queue may roll on between the load
// of latest and the opening of its file, and retention delete that file,
// when this process is paused or slow in between: then the newer latest.
func (q *Queue) acquireLatest() (*cycle, uint32, error) {
	for {
		latest := q.latest.Load()
		n := uint32(latest - 1)
		if afterLatestLoad != nil {
			afterLatestLoad(q)
		}
		c, _, err := q.acquire(n, false, 0)
		if errors.Is(err, os.ErrNotExist) && q.latest.Load() != latest {
			continue
		}
		return c, n, err
	}
}

// behindLatest reports whether cycle n lies before the latest cycle: a
// cycle the queue has rolled past, which retention may have deleted.
func (q *Queue) behindLatest(n uint32) bool {
	latest := q.latest.Load()
	return latest != 0 && uint64(n) < latest-1
}

// orphaned reports whether c is a cycle file made again after retention
// deleted the original: it lies before the latest cycle yet names no next
// one, and holds no message. A cycle the queue rolled past names its next
// before the roll that publishes a later cycle, so no cycle of the chain
// looks like this; readers and appenders pass over it. (One with messages
// is damage, which they report.)
func (q *Queue) orphaned(c *cycle) bool {
	if !q.behindLatest(c.num) || c.next.Load() != 0 {
		return false
	}
	w := c.walkFrom(0, dataStart)
	for {
		h, err := w.header()
		switch {
		case err != nil:
			return false
		case h == 0 || h&flagEOF != 0:
			return w.seq == 0
		case h&flagMeta == 0:
			return false
		}
		if w.step(h) != nil {
			return false
		}
	}
}

// removeOrphan deletes the cycle file this process just created for c
// when it turns out to be orphaned, unless the name now holds another file.
func (q *Queue) removeOrphan(c *cycle) {
	path := q.cyclePath(c.num)
	if shm.IsNamed(c.f, path) {
		shm.Remove(path)
		q.forget(c.num)
	}
}

func (q *Queue) createFirstCycle() error {
	if _, err := q.lock.Lock(q.witness, 0); err != nil {
		return err
	}
	defer q.lock.Unlock()
	if q.latest.Load() != 0 {
		return nil
	}
	// A process that died between creating the first cycle file and
	// publishing it left the file behind: adopt the oldest such file.
	n := q.cycleOf(q.wallNow())
	if cs, err := q.listCycles(); err != nil {
		return err
	} else if len(cs) > 0 {
		n = cs[0]
	}
	c, created, err := q.acquire(n, true, 0)
	if err != nil {
		return &shm.OpError{Pkg: "queue", Op: "create", Path: q.cyclePath(n), Err: err}
	}
	c.release()
	q.bumpLatest(n)
	if created {
		q.event(CycleRolled, n)
	}
	return nil
}

// sealCycle seals cycle n if its file exists and is not sealed yet.
func (q *Queue) sealCycle(n uint32) error {
	p, _, err := q.acquire(n, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // deleted by retention
	}
	if err != nil {
		return err
	}
	defer p.release()
	return p.seal(q.writerBits)
}

func (q *Queue) bumpLatest(n uint32) {
	for {
		cur := q.latest.Load()
		if cur >= uint64(n)+1 || q.latest.CompareAndSwap(cur, uint64(n)+1) {
			return
		}
	}
}

// afterLatestLoad, set by tests, runs in acquireLatest between the load
// of the latest cycle and the opening of its file.
var afterLatestLoad func(q *Queue)

// beforeRollCreate, set by tests, runs in a roll between the check that
// the next cycle is not behind the latest and the making of its file.
var beforeRollCreate func(q *Queue, next uint32)

// leaveBehind moves the appenders from c, which the queue has rolled past,
// to the latest cycle. c is sealed already unless its roller is between
// publishing the next cycle and sealing c: seal it, as that roller would.
func (q *Queue) leaveBehind(c *cycle) error {
	if err := c.seal(q.writerBits); err != nil {
		return err
	}
	if err := q.attachLatest(); err != nil {
		return err
	}
	q.notify()
	return nil
}

// rollIfDue rolls from c when the clock has passed its end.
func (q *Queue) rollIfDue(c *cycle) error {
	now := q.cycleOf(q.wallNow())
	if now <= c.num {
		// The timer fired a hair early: try again a little later.
		q.appendMu.Lock()
		if q.wcur.Load() == c {
			q.armRoll(q.wallNow().Add(time.Millisecond))
		}
		q.appendMu.Unlock()
		return nil
	}
	return q.advance(c, now)
}

// advance moves the appenders from cycle c to the next one: the one c's
// header names, or a new cycle to (steps in docs/QUEUE-FORMAT.md).
func (q *Queue) advance(c *cycle, to uint32) error {
	q.appendMu.Lock()
	if q.wcur.Load() != c {
		q.appendMu.Unlock()
		return nil // another goroutine moved on
	}
	// 1. Decide the next cycle: the first roller's choice wins.
	if to <= c.num {
		to = c.num + 1
	}
	c.next.CompareAndSwap(0, uint64(to)+1)
	next := c.next.Load()
	if next-1 <= uint64(c.num) || next-1 > maxCycle {
		q.appendMu.Unlock()
		return fmt.Errorf("%w: cycle %d names %d as its next", ErrCorrupt, c.num, int64(next)-1)
	}
	n := uint32(next - 1)
	if q.behindLatest(n) {
		// This appender was left behind (idle, or paused) while others
		// rolled on: n may be deleted, and made again it would fork the
		// chain where no reader looks. Go to the latest cycle instead.
		err := q.leaveBehind(c)
		q.appendMu.Unlock()
		return err
	}
	if beforeRollCreate != nil {
		beforeRollCreate(q, n)
	}
	// 2. Make sure its file exists, 3. publish it as the latest cycle.
	nc, created, err := q.acquire(n, true, uint64(c.num)+1)
	if errors.Is(err, os.ErrNotExist) && q.behindLatest(n) {
		// Others rolled past n and retention deleted the file between its
		// creation and its opening here: as below, go to the latest.
		err := q.leaveBehind(c)
		q.appendMu.Unlock()
		return err
	}
	if err == nil && nc.prev != uint64(c.num)+1 {
		nc.release()
		err = fmt.Errorf("%w: cycle %d names %d as its next, but that follows %d", ErrCorrupt, c.num, n, int64(nc.prev)-1)
	}
	if err != nil {
		q.appendMu.Unlock()
		return &shm.OpError{Pkg: "queue", Op: "roll to", Path: q.cyclePath(n), Err: err}
	}
	if q.orphaned(nc) {
		// Others rolled past n and retention deleted it between the check
		// above and the file's creation: undo it, as above.
		if created {
			q.removeOrphan(nc)
		}
		nc.release()
		err := q.leaveBehind(c)
		q.appendMu.Unlock()
		return err
	}
	q.bumpLatest(n)
	// 4. Seal c: messages claimed in c stay there, later ones go to nc.
	if err := c.seal(q.writerBits); err != nil {
		nc.release()
		q.appendMu.Unlock()
		return err
	}
	q.setCycle(nc)
	q.appendMu.Unlock()
	if created {
		q.event(CycleRolled, n)
		if q.opts.KeepCycles > 0 {
			q.DeleteCycles(q.opts.KeepCycles, false)
		}
	}
	q.notify() // tailers waiting at c's end move on
	return nil
}
