package queue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/offmap/offmap/internal/shm"
)

// Tailer reads a queue in index order, from any process, while others
// append. Each tailer has its own position; a named tailer also keeps an
// acknowledged position in the queue's metadata file. A Tailer is used by
// one goroutine at a time.
type Tailer struct {
	q        *Queue
	c        *cycle // nil: positioned before the first cycle >= from
	from     uint32
	mem      []byte // c's mapped prefix as last seen
	off      int64
	seq      uint32
	slot     int // named-tailer slot, or -1
	closed   bool
	stallAt  int64 // when the busy header at stallOff was first seen
	stallOff int64
	stallHdr uint64

	listener listener // for blocking waits; see wait.go
	setMark  uint64   // for Set.Wait
}

// Tailer returns a new tailer at the start of the queue.
func (q *Queue) Tailer() (*Tailer, error) {
	t := &Tailer{q: q, slot: -1}
	t.listener.init(t)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return nil, ErrClosed
	}
	q.tailSet[t] = struct{}{}
	return t, nil
}

// NamedTailer returns a tailer whose acknowledged position persists in the
// queue: it starts after the last message acknowledged (see Ack) by any
// tailer of that name, in any process, or at the start. Names are 1 to 48
// bytes; a queue holds up to 128 of them. A queue open read-only cannot add
// a name: an unknown one gets ErrNotFound.
func (q *Queue) NamedTailer(name string) (*Tailer, error) {
	if len(name) == 0 || len(name) > maxTailerName {
		return nil, fmt.Errorf("%w: tailer name of %d bytes (1 to %d)", ErrInvalidOptions, len(name), maxTailerName)
	}
	slot, err := q.tailerSlot(name, !q.readOnly)
	if err != nil {
		return nil, err
	}
	if slot < 0 {
		return nil, fmt.Errorf("%w: no tailer named %q, and a queue open read-only cannot add one", ErrNotFound, name)
	}
	t, err := q.Tailer()
	if err != nil {
		return nil, err
	}
	t.slot = slot
	if acked := q.tailerWord(slot, 8).Load(); acked != 0 {
		err := t.Seek(acked - 1)
		if errors.Is(err, ErrNotFound) {
			// Its cycle was deleted by a forced retention: go on from
			// the next cycle that exists.
			t.SeekStart()
			t.from = uint32((acked - 1) >> 32)
			return t, nil
		}
		if err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

func (q *Queue) tailerWord(slot, off int) *atomic.Uint64 {
	return shm.U64(q.tailers, slot*tailerSlotSize+off)
}

// tailerSlot finds the slot of a named tailer, adding it if asked to. It
// returns -1 when the name is absent and add is false.
func (q *Queue) tailerSlot(name string, add bool) (int, error) {
	if add {
		if _, err := q.lock.Lock(q.self, 0); err != nil {
			return -1, err
		}
		defer q.lock.Unlock()
	}
	free := -1
	for i := 0; i < maxNamedTailers; i++ {
		n := q.tailerWord(i, 0).Load()
		if n == 0 {
			if free < 0 {
				free = i
			}
			continue
		}
		if n == uint64(len(name)) && string(q.tailerName(i, int(n))) == name {
			return i, nil
		}
	}
	if !add {
		return -1, nil
	}
	if free < 0 {
		return -1, ErrTooManyTailers
	}
	base := free*tailerSlotSize + 16
	copy(q.tailers[base:base+maxTailerName], name)
	clear(q.tailers[base+len(name) : base+maxTailerName])
	q.tailerWord(free, 8).Store(0)
	q.tailerWord(free, 0).Store(uint64(len(name)))
	return free, nil
}

func (q *Queue) tailerName(slot, n int) []byte {
	base := slot*tailerSlotSize + 16
	return q.tailers[base : base+min(n, maxTailerName)]
}

// DeleteTailer forgets a named tailer, so that retention no longer spares
// the cycles it has not acknowledged.
func (q *Queue) DeleteTailer(name string) error {
	if q.readOnly {
		return ErrReadOnly
	}
	if _, err := q.lock.Lock(q.self, 0); err != nil {
		return err
	}
	defer q.lock.Unlock()
	for i := 0; i < maxNamedTailers; i++ {
		if n := q.tailerWord(i, 0).Load(); n == uint64(len(name)) && string(q.tailerName(i, int(n))) == name {
			q.tailerWord(i, 0).Store(0)
			return nil
		}
	}
	return fmt.Errorf("%w: no tailer named %q", ErrNotFound, name)
}

// Ack records the tailer's position, so that a named tailer opened later
// (after a restart) continues from here: every message read so far counts
// as processed. For an anonymous tailer it does nothing.
func (t *Tailer) Ack() error {
	if t.slot < 0 {
		return nil
	}
	if t.q.readOnly {
		return ErrReadOnly
	}
	t.q.tailerWord(t.slot, 8).Store(t.Index() + 1)
	return nil
}

// Index returns the index of the next message the tailer will read (or of
// where it will be appended).
func (t *Tailer) Index() uint64 {
	if t.c == nil {
		return Index(t.from, 0)
	}
	return Index(t.c.num, t.seq)
}

// Close releases the tailer's mapping; views it returned become invalid.
func (t *Tailer) Close() {
	if t.closed {
		return
	}
	t.closed = true
	t.drop()
	t.q.mu.Lock()
	delete(t.q.tailSet, t)
	t.q.mu.Unlock()
}

func (t *Tailer) drop() {
	if t.c != nil {
		t.c.release()
		t.c, t.mem = nil, nil
	}
}

// setCycle positions the tailer at the start of c, whose reference it
// takes over.
func (t *Tailer) setCycle(c *cycle) {
	t.drop()
	t.c, t.mem, t.off, t.seq = c, c.mem(), dataStart, 0
	t.stallHdr = 0
}

// stalled reports whether the tailer waits at a busy message, whose
// writer may be dead.
func (t *Tailer) stalled() bool { return t.stallHdr != 0 && t.stallOff == t.off }

// Next returns the next message: its index and a view of its payload in
// the mapped file, valid until the tailer moves to another cycle file
// (copy it to keep it). It returns ErrNoMessage when none is complete yet.
// It allocates nothing.
func (t *Tailer) Next() (uint64, []byte, error) {
	h, err := t.peek()
	if err != nil {
		return 0, nil, err
	}
	n := int64(h & lenMask)
	p := t.off + 8
	msg := t.mem[p : p+n : p+n]
	idx := Index(t.c.num, t.seq)
	t.off = p + (n+7)&^7
	t.seq++
	return idx, msg, nil
}

// Read copies the next message into buf and returns its length and index.
// When buf is too small it returns the length needed and
// io.ErrShortBuffer, and stays at the message.
func (t *Tailer) Read(buf []byte) (int, uint64, error) {
	h, err := t.peek()
	if err != nil {
		return 0, 0, err
	}
	n := int64(h & lenMask)
	if int64(len(buf)) < n {
		return int(n), 0, io.ErrShortBuffer
	}
	p := t.off + 8
	copy(buf, t.mem[p:p+n])
	idx := Index(t.c.num, t.seq)
	t.off = p + (n+7)&^7
	t.seq++
	return int(n), idx, nil
}

// HasNext reports whether a complete message is ready. It allocates
// nothing and makes no system call in the common case.
func (t *Tailer) HasNext() bool {
	_, err := t.peek()
	return err == nil
}

// Drain calls fn for each message ready, up to max of them (no limit if
// max <= 0) or until fn returns false, and returns how many it passed.
// The view passed to fn is valid only during the call.
func (t *Tailer) Drain(max int, fn func(idx uint64, msg []byte) bool) (int, error) {
	n := 0
	for max <= 0 || n < max {
		idx, msg, err := t.Next()
		if err == ErrNoMessage {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
		if !fn(idx, msg) {
			break
		}
	}
	return n, nil
}

// peek positions the tailer at the next complete message and returns its
// header: past index arrays and skipped slots, across cycle ends, and
// past a busy slot whose writer is dead.
func (t *Tailer) peek() (uint64, error) {
	// Fast path: a complete message inside the mapped prefix.
	if t.c != nil && t.off+8 <= int64(len(t.mem)) {
		h := shm.U64(t.mem, int(t.off)).Load()
		if h == 0 && !t.closed { // nothing yet: the common answer of a poll
			t.stallHdr = 0
			return 0, ErrNoMessage
		}
		if h&(flagBusy|flagEOF|flagMeta|flagSkipped) == 0 {
			if n := h & lenMask; n <= maxMessage && t.off+slotSize(n) <= int64(len(t.mem)) {
				return h, nil
			}
		}
	}
	return t.peekSlow()
}

func (t *Tailer) peekSlow() (uint64, error) {
	if t.closed {
		return 0, ErrClosed
	}
	if t.c == nil {
		if err := t.attach(); err != nil {
			return 0, err
		}
	}
	for {
		h, ok, err := t.c.header(&t.mem, t.off)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("%w: cycle %d ends at %d without a free slot", ErrCorrupt, t.c.num, t.off)
		}
		switch {
		case h == 0:
			t.stallHdr = 0
			return 0, ErrNoMessage
		case h&flagEOF != 0:
			if err := t.nextCycle(); err != nil {
				return 0, err
			}
			continue
		case h&flagBusy != 0 && h&flagMeta == 0:
			if !t.writerGone(h) {
				return 0, ErrNoMessage
			}
			if !t.c.writable || shm.U64(t.mem, int(t.off)).CompareAndSwap(h, h&^flagBusy|flagSkipped) {
				h = h&^flagBusy | flagSkipped
			} else {
				continue
			}
		}
		end, err := t.c.slotEnd(&t.mem, t.off, h)
		if err != nil {
			return 0, err
		}
		if h&(flagMeta|flagSkipped) == 0 {
			return h, nil
		}
		t.off = end
		if h&flagSkipped != 0 {
			t.seq++
		}
	}
}

// writerGone reports whether the busy slot at the tailer's position has
// waited long enough and its writer is dead.
func (t *Tailer) writerGone(h uint64) bool {
	now := mono()
	if t.stallOff != t.off || t.stallHdr != h {
		t.stallOff, t.stallHdr, t.stallAt = t.off, h, now
		return false
	}
	if now-t.stallAt < int64(t.q.opts.SkipAfter) {
		return false
	}
	t.stallAt = now
	return t.q.writerDead(h)
}

// attach maps the first cycle at or after t.from, if any.
func (t *Tailer) attach() error {
	if t.q.latest.Load() == 0 {
		return ErrNoMessage
	}
	n, ok, err := t.q.firstCycleFrom(t.from)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNoMessage
	}
	c, _, err := t.q.acquire(n, false, 0)
	if err != nil {
		return err
	}
	t.setCycle(c)
	return nil
}

// nextCycle follows an end-of-cycle mark to the next cycle file (or the
// first one after it, when retention deleted it). The next word lies
// outside the header's checksum, so the cycle it leads to must name this
// one as its previous, and none may be skipped: a damaged word would
// otherwise hide the cycles it jumps over without an error.
func (t *Tailer) nextCycle() error {
	from := t.c.num
	n := t.c.next.Load()
	if n == 0 || n-1 <= uint64(from) || n-1 > maxCycle {
		return fmt.Errorf("%w: cycle %d is sealed but names %d as its next", ErrCorrupt, from, int64(n)-1)
	}
	next := uint32(n - 1)
	c, _, err := t.q.acquire(next, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		// Deleted by retention, which deletes the oldest cycles first: no
		// cycle between the two may exist.
		if m, ok, err := t.q.firstCycleFrom(from + 1); err != nil {
			return err
		} else if ok && m < next {
			return fmt.Errorf("%w: cycle %d names %d as its next, but cycle %d lies between", ErrCorrupt, from, next, m)
		}
		t.drop()
		t.from = next
		return t.attach()
	}
	if err != nil {
		return err
	}
	if c.prev != uint64(from)+1 {
		c.release()
		return fmt.Errorf("%w: cycle %d names %d as its next, but that follows %d", ErrCorrupt, from, next, int64(c.prev)-1)
	}
	t.setCycle(c)
	return nil
}

// SeekStart moves the tailer to the first message of the queue.
func (t *Tailer) SeekStart() error {
	if t.closed {
		return ErrClosed
	}
	t.drop()
	t.from = 0
	if err := t.attach(); err != nil && err != ErrNoMessage {
		return err
	}
	return nil
}

// SeekEnd moves the tailer past the last message: it will read only
// messages appended from now on.
func (t *Tailer) SeekEnd() error {
	if t.closed {
		return ErrClosed
	}
	latest := t.q.latest.Load()
	if latest == 0 {
		return t.SeekStart()
	}
	c, _, err := t.q.acquire(uint32(latest-1), false, 0)
	if err != nil {
		return err
	}
	seq, off, err := c.end()
	if err != nil && err != errEOF {
		c.release()
		return err
	}
	t.setCycle(c)
	t.off, t.seq = off, seq
	return nil
}

// Seek moves the tailer to the message with index idx, or to the end of
// its cycle when idx is the index the next message there would get. It
// uses the sparse index: it reads at most IndexSpacing headers.
func (t *Tailer) Seek(idx uint64) error {
	if t.closed {
		return ErrClosed
	}
	cyc, seq := SplitIndex(idx)
	c, _, err := t.q.acquire(cyc, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %#x: no cycle file %s", ErrNotFound, idx, t.q.cycleName(cyc))
	}
	if err != nil {
		return err
	}
	s, off, err := c.find(seq)
	if err != nil {
		c.release()
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: %#x", err, idx)
		}
		return err
	}
	t.setCycle(c)
	t.off, t.seq = off, s
	return nil
}

// find returns the position of message seq in the cycle, starting from
// the nearest entry of the sparse index at or before it.
func (c *cycle) find(seq uint32) (uint32, int64, error) {
	mem := c.mem()
	s, off := c.indexed(&mem, seq)
	for {
		if s == seq {
			return s, off, nil
		}
		h, ok, err := c.header(&mem, off)
		if err != nil {
			return 0, 0, err
		}
		if !ok || h == 0 || h&flagEOF != 0 {
			return 0, 0, ErrNotFound
		}
		if off, err = c.slotEnd(&mem, off, h); err != nil {
			return 0, 0, err
		}
		if h&flagMeta == 0 {
			s++
		}
	}
}

// indexed returns the last recorded position at or before message seq:
// an index entry, checked to point at a message slot, or the first slot.
func (c *cycle) indexed(mem *[]byte, seq uint32) (uint32, int64) {
	for j := int64(seq) >> c.q.spacing; j > 0; j-- {
		a := j / indexEntries
		if a >= l1Entries {
			j = l1Entries * indexEntries
			continue
		}
		arr := int64(c.l1[a].Load())
		if !c.validArray(*mem, arr) {
			j = a * indexEntries // skip the whole missing array
			continue
		}
		off := int64(shm.U64(*mem, int(arr+(j%indexEntries)*8)).Load())
		if off < dataStart || off&7 != 0 || off+8 > int64(len(*mem)) {
			continue
		}
		if h := shm.U64(*mem, int(off)).Load(); h != 0 && h&(flagMeta|flagEOF) == 0 {
			return uint32(j << c.q.spacing), off
		}
	}
	return 0, dataStart
}

// Prefetch starts bringing in the tailer's state, ahead of a read by an
// event loop that serves many tailers. It reads nothing.
func (t *Tailer) Prefetch() { shm.PrefetchObject(t) }
