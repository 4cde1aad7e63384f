package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"

	"github.com/offmap/offmap/internal/shm"
)

// Tailer reads a queue in index order, from any process, while others
// append. Each tailer has its own position; a named tailer also keeps an
// acknowledged position in the queue's metadata file. A Tailer is used by
// one goroutine at a time.
type Tailer struct {
	walker   // its position; c is nil before the first cycle >= from
	q        *Queue
	from     uint32
	slot     int // named-tailer slot, or -1
	closed   bool
	checked  bool  // the queue's messages carry checksums, checked by every read
	stallAt  int64 // when the busy header at stallOff was first seen
	stallOff int64
	stallHdr uint64
	// The checks of the walk against the sparse index (checkIndexed,
	// checkEnd), done once per position: the offset of the message last
	// checked against its index entry, and of the free slot last checked
	// as the end (0: none).
	indexOK, endOK int64
	boundary       uint32 // index spacing - 1: a message at seq&boundary == 0 has an index entry

	listener listener  // for blocking waits; see wait.go
	setMark  uint64    // for WaitSet.Wait
	setEntry *setEntry // the WaitSet entry watching the tailer, or nil
	// found is a truncation of the tailer's cycle file found outside a
	// read (a WaitSet's check after the notifier's), returned by the next
	// read. endOK is then -1, so that the read leaves the fast path.
	found error
}

// Tailer returns a new tailer at the start of the queue.
func (q *Queue) Tailer() (*Tailer, error) {
	t := &Tailer{q: q, slot: -1, boundary: q.meta.IndexSpacing - 1, checked: q.checksums}
	t.listener.init(t)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return nil, ErrClosed
	}
	q.tailSet[t] = struct{}{}
	return t, nil
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
func (t *Tailer) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	t.drop()
	t.q.mu.Lock()
	delete(t.q.tailSet, t)
	t.q.mu.Unlock()
	return nil
}

// All yields the messages ready now, in index order, as Next returns them
// (each payload a view valid until the tailer moves to another cycle
// file), and stops at the end or at an error, which the next call of Next
// returns. The tailer moves past each message yielded.
func (t *Tailer) All() iter.Seq2[uint64, []byte] {
	return func(yield func(uint64, []byte) bool) {
		for {
			idx, msg, err := t.Next()
			if err != nil || !yield(idx, msg) {
				return
			}
		}
	}
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
	t.indexOK, t.endOK = 0, 0
	t.found = nil
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
	msg, err := t.message(h)
	if err != nil {
		return 0, nil, err
	}
	return t.pass(h), msg, nil
}

// pass moves the tailer past the message with header h at its position
// and returns the message's index.
func (t *Tailer) pass(h uint64) uint64 {
	idx := Index(t.c.num, t.seq)
	t.off += slotSize(h & lenMask)
	t.seq++
	return idx
}

// message returns the payload of the complete message with header h at
// the tailer's position, a view of the mapping. In a queue of checksummed
// messages it checks the checksum first: a message that fails it is an
// ErrCorrupt naming its index, and the tailer stays before it (Seek past
// it to go on).
func (t *Tailer) message(h uint64) ([]byte, error) {
	n := int64(h & lenMask)
	p := t.off + 8
	if !t.checked {
		return t.mem[p : p+n : p+n], nil
	}
	return t.checkedMessage(p, n)
}

func (t *Tailer) checkedMessage(p, n int64) ([]byte, error) {
	msg, err := checkedPayload(t.mem, p, n, Index(t.c.num, t.seq))
	if err != nil {
		return nil, fmt.Errorf("%w: message %d:%d %v", ErrCorrupt, t.c.num, t.seq, err)
	}
	return msg, nil
}

// checkedPayload returns the n bytes stored at p (inside mem) for the
// message of index idx, less their checksum, or says how they fail it.
func checkedPayload(mem []byte, p, n int64, idx uint64) ([]byte, error) {
	if n < sumSize {
		return nil, fmt.Errorf("of %d bytes has no room for its checksum", n)
	}
	msg := mem[p+sumSize : p+n : p+n]
	if got, want := messageSum(msg, idx), binary.LittleEndian.Uint64(mem[p:]); got != want {
		return nil, fmt.Errorf("of %d bytes fails its checksum: %#x, stored %#x", n-sumSize, got, want)
	}
	return msg, nil
}

// ReadInto copies the next message into buf and returns its length and
// index, for a caller that keeps the message past the tailer's next move
// to another cycle file (Next's view does not last). When buf is too
// small it returns the length needed and io.ErrShortBuffer, and stays at
// the message. Each call reads one whole message: a Tailer is no
// io.Reader.
func (t *Tailer) ReadInto(buf []byte) (int, uint64, error) {
	h, err := t.peek()
	if err != nil {
		return 0, 0, err
	}
	msg, err := t.message(h)
	if err != nil {
		return 0, 0, err
	}
	if len(buf) < len(msg) {
		return len(msg), 0, io.ErrShortBuffer
	}
	copy(buf, msg)
	return len(msg), t.pass(h), nil
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
		if h == 0 {
			if !t.closed && t.off == t.endOK { // nothing yet: the common answer of a poll
				t.stallHdr = 0
				return 0, ErrNoMessage
			}
		} else if h&(flagBusy|flagEOF|flagMeta|flagSkipped) == 0 && (t.seq&t.boundary != 0 || t.off == t.indexOK) {
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
	if err := t.found; err != nil {
		t.found = nil
		return 0, err
	}
	if t.c == nil {
		if err := t.attach(); err != nil {
			return 0, err
		}
	}
	for {
		h, err := t.header()
		if err != nil {
			return 0, err
		}
		switch {
		case h == 0:
			if t.off != t.endOK {
				if err := t.checkEnd(false); err != nil {
					return 0, err
				}
				t.endOK = t.off
			}
			t.stallHdr = 0
			return 0, ErrNoMessage
		case h&flagEOF != 0:
			if err := t.checkEnd(true); err != nil {
				return 0, err
			}
			if err := t.nextCycle(); err != nil {
				return 0, err
			}
			continue
		case h&flagBusy != 0 && h&flagMeta == 0:
			if !t.writerGone(h) {
				return 0, ErrNoMessage
			}
			if !t.c.writable || shm.U64(t.mem, int(t.off)).CompareAndSwap(h, h&^flagBusy|flagSkipped) {
				if t.c.writable { // this tailer marked it: counted once, by the marker
					t.q.skipped.Add(1)
				}
				h = h&^flagBusy | flagSkipped
			} else {
				continue
			}
		}
		if h&flagMeta == 0 && t.seq&t.boundary == 0 && t.off != t.indexOK {
			if err := t.checkIndexed(); err != nil {
				return 0, err
			}
			t.indexOK = t.off
		}
		if h&(flagMeta|flagSkipped) == 0 {
			// A complete message: check that it lies inside the file.
			if _, err := t.c.slotEnd(&t.mem, t.off, h); err != nil {
				return 0, err
			}
			return h, nil
		}
		if err := t.step(h); err != nil {
			return 0, err
		}
	}
}

// checkIndexed checks the walk at a message (or skipped slot) whose
// sequence number has an entry in the sparse index: a recorded entry must
// be the tailer's offset. Slot lengths lie outside any checksum; a damaged
// one sends the walk into the middle of other slots, where it would read
// what was never appended as messages. The index, recorded as messages
// were claimed, catches that at the next index boundary.
func (t *Tailer) checkIndexed() error {
	e, err := t.indexEntry(t.seq)
	if err != nil || e == 0 || e == t.off {
		return err
	}
	return fmt.Errorf("%w: cycle %d: the walk reached message %d at offset %d, but the sparse index records it at %d (a damaged slot length before it?)",
		ErrCorrupt, t.c.num, t.seq, t.off, e)
}

// checkEnd checks the end of the walk, a free slot (or, with eof, the
// end-of-cycle mark) at the tailer's position: the sparse index must not
// record a message at or after the tailer's sequence number, as it does
// when a damaged slot length sent the walk into zeros (an index array, a
// payload) before the real end, or past messages it then never counted.
func (t *Tailer) checkEnd(eof bool) error {
	next := (t.seq + t.boundary) &^ t.boundary // the first boundary at or after t.seq
	if next < t.seq {
		return nil // past the last sequence number
	}
	e, err := t.indexEntry(next)
	if err != nil || e == 0 {
		return err
	}
	if !eof && shm.U64(t.mem, int(t.off)).Load() != 0 {
		return nil // appends came since: the entry is theirs
	}
	return fmt.Errorf("%w: cycle %d: the walk ends at message %d at offset %d, but the sparse index records message %d at %d (a damaged slot length before it?)",
		ErrCorrupt, t.c.num, t.seq, t.off, next, e)
}

// indexEntry returns the offset that the sparse index records for
// message seq, a multiple of the spacing (0: not recorded).
func (t *Tailer) indexEntry(seq uint32) (int64, error) {
	c := t.c
	j := int64(seq) >> t.q.spacing
	a := j / indexEntries
	if a >= l1Entries {
		return 0, nil // past the index
	}
	arr := int64(c.l1[a].Load())
	if arr == 0 {
		return 0, nil // no array yet: nothing recorded
	}
	if !c.validArray(t.mem, arr) {
		// The array may lie past what this tailer mapped.
		mem, err := c.refresh(arr + indexArrayBytes)
		if err != nil {
			return 0, err
		}
		t.mem = mem
		if !c.validArray(t.mem, arr) {
			return 0, fmt.Errorf("%w: cycle %d: level-1 index entry %d points at %d, not at an index array", ErrCorrupt, c.num, a, arr)
		}
	}
	return int64(shm.U64(t.mem, int(arr+(j%indexEntries)*8)).Load()), nil
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

// attach maps the first cycle at or after t.from, if any, passing over
// orphaned cycle files (see Queue.orphaned): they hold nothing and would
// never be sealed, so a tailer in one would wait forever.
func (t *Tailer) attach() error {
	if t.q.latest.Load() == 0 {
		return ErrNoMessage
	}
	for {
		n, ok, err := t.q.firstCycleFrom(t.from)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNoMessage
		}
		c, _, err := t.q.acquire(n, false, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since the listing: list again
		}
		if err != nil {
			return err
		}
		if t.q.orphaned(c) {
			c.release()
			t.from = n + 1
			continue
		}
		t.setCycle(c)
		return nil
	}
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
	if err == nil && t.q.orphaned(c) {
		c.release()
		err = os.ErrNotExist // made again after retention deleted it
	}
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
	if t.q.latest.Load() == 0 {
		return t.SeekStart()
	}
	c, _, err := t.q.acquireLatest()
	if err != nil {
		return err
	}
	return t.toEndOf(c)
}

// toEndOf positions the tailer at the end of c's slots (its first free
// slot, or its end-of-cycle mark), taking over c's reference.
func (t *Tailer) toEndOf(c *cycle) error {
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
		return fmt.Errorf("%w: %d:%d: no cycle file %s", ErrNotFound, cyc, seq, t.q.cycleName(cyc))
	}
	if err != nil {
		return err
	}
	s, off, err := c.find(seq)
	if err != nil {
		c.release()
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: %d:%d", err, cyc, seq)
		}
		return err
	}
	t.setCycle(c)
	t.off, t.seq = off, s
	return nil
}

// Prefetch starts bringing in the tailer's state, ahead of a read by an
// event loop that serves many tailers. It reads nothing.
func (t *Tailer) Prefetch() { shm.PrefetchObject(t) }
