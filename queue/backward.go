package queue

import (
	"errors"
	"os"
)

// Reading backwards. Slots link forwards only, so a step back goes
// through the sparse index: the entry at or before the message, then at
// most IndexSpacing headers forwards.

// Prev moves the tailer back to the complete message before its position
// and returns it, crossing into earlier cycles; ErrNoMessage when there is
// none (the start of the queue, or of what retention kept). Slots that
// hold no complete message (skipped, or still being written) are passed
// over. After Prev, Next returns the same message again; repeated Prev
// calls read the queue backwards. A tailer that has not read or sought
// yet starts from the end: its first Prev returns the last message.
func (t *Tailer) Prev() (uint64, []byte, error) {
	if t.closed {
		return 0, nil, ErrClosed
	}
	if t.c == nil {
		if err := t.SeekEnd(); err != nil {
			return 0, nil, err
		}
		if t.c == nil {
			return 0, nil, ErrNoMessage // no cycle yet
		}
	}
	for {
		if t.seq == 0 {
			if err := t.toPrevCycle(); err != nil {
				return 0, nil, err
			}
			continue
		}
		seq, off, err := t.c.find(t.seq - 1)
		if err != nil {
			return 0, nil, err
		}
		t.off, t.seq = off, seq
		h, err := t.header()
		for err == nil && h&flagMeta != 0 {
			// find stops at the boundary before the message: metadata
			// (an index array, the padding a cycle starts with) may lie
			// between.
			if err = t.step(h); err == nil {
				h, err = t.header()
			}
		}
		if err != nil {
			return 0, nil, err
		}
		if h&(flagBusy|flagSkipped|flagEOF) != 0 || h == 0 {
			continue
		}
		if _, err := t.c.slotEnd(&t.mem, t.off, h); err != nil {
			return 0, nil, err
		}
		msg, err := t.message(h)
		if err != nil {
			return 0, nil, err
		}
		return Index(t.c.num, t.seq), msg, nil
	}
}

// toPrevCycle moves the tailer to the end of the cycle before its own.
func (t *Tailer) toPrevCycle() error {
	prev := t.c.prev
	if prev == 0 {
		return ErrNoMessage // the queue's first cycle
	}
	c, _, err := t.q.acquire(uint32(prev-1), false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoMessage // deleted by retention
	}
	if err != nil {
		return err
	}
	// The end of its slots: sealed, or not yet if a roller died before
	// sealing it (no message follows that mark either way).
	return t.toEndOf(c)
}

// SeekLast moves the tailer so that it reads the last n messages of the
// queue (all of them if there are fewer), as tail -n does: Next then
// returns them in order. It steps back through the sparse index, so its
// cost grows with n times IndexSpacing headers, not with the queue.
func (t *Tailer) SeekLast(n int) error {
	if err := t.SeekEnd(); err != nil {
		return err
	}
	for range n {
		if _, _, err := t.Prev(); err == ErrNoMessage {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// FirstIndex returns the index of the first complete message of the queue
// (of the cycles retention kept), or ErrNoMessage. Slots still being
// written, or skipped, before it are passed over, as LastIndex does.
func (q *Queue) FirstIndex() (uint64, error) {
	t, err := q.Tailer()
	if err != nil {
		return 0, err
	}
	defer t.Close()
	if err := t.attach(); err != nil {
		return 0, err
	}
	for {
		h, err := t.header()
		switch {
		case err != nil:
			return 0, err
		case h == 0:
			return 0, ErrNoMessage
		case h&flagEOF != 0:
			if err := t.nextCycle(); err != nil {
				return 0, err
			}
			continue
		case h&(flagBusy|flagSkipped|flagMeta) == 0:
			return Index(t.c.num, t.seq), nil
		}
		if err := t.step(h); err != nil {
			return 0, err
		}
	}
}

// LastIndex returns the index of the last complete message of the queue,
// or ErrNoMessage.
func (q *Queue) LastIndex() (uint64, error) {
	t, err := q.Tailer()
	if err != nil {
		return 0, err
	}
	defer t.Close()
	if err := t.SeekEnd(); err != nil {
		return 0, err
	}
	idx, _, err := t.Prev()
	return idx, err
}
