package queue

import (
	"errors"
	"fmt"

	"github.com/offmap/offmap/internal/shm"
)

func packHint(seq uint32, off int64) uint64 { return uint64(seq)<<32 | uint64(off>>3) }

func unpackHint(h uint64) (uint32, int64) { return uint32(h >> 32), int64(uint32(h)) << 3 }

// errEOF is returned by the walkers at an end-of-cycle header.
var errEOF = errors.New("queue: end of cycle")

// header returns the slot header at off, mapping more of the file when
// off lies past the mapped prefix. ok is false when the file ends there.
func (c *cycle) header(mem *[]byte, off int64) (uint64, bool, error) {
	if off < dataStart || off&7 != 0 {
		return 0, false, fmt.Errorf("%w: cycle %d: slot offset %d", ErrCorrupt, c.num, off)
	}
	if off+8 > int64(len(*mem)) {
		m, err := c.refresh(off + 8)
		*mem = m
		if err != nil {
			return 0, false, err
		}
		if off+8 > int64(len(m)) {
			return 0, false, nil
		}
	}
	return shm.U64(*mem, int(off)).Load(), true, nil
}

// slotEnd checks that a claimed slot with header h at off lies inside the
// file and returns the offset of the next slot.
func (c *cycle) slotEnd(mem *[]byte, off int64, h uint64) (int64, error) {
	n := h & lenMask
	if n > maxMessage {
		return 0, fmt.Errorf("%w: cycle %d: slot at %d has length %d", ErrCorrupt, c.num, off, n)
	}
	end := off + slotSize(n)
	if end > int64(len(*mem)) {
		m, err := c.refresh(end)
		*mem = m
		if err != nil {
			return 0, err
		}
		if end > int64(len(m)) {
			return 0, fmt.Errorf("%w: cycle %d: slot at %d of %d bytes runs past the end of the file", ErrCorrupt, c.num, off, n)
		}
	}
	return end, nil
}

// A walker steps from slot to slot of a cycle (header, then slotEnd,
// then the sequence number moves on unless the slot is metadata),
// mapping more of the file as it goes. Every walk uses one: appends,
// seals, readers (a Tailer is a walker), seeks and Check.
type walker struct {
	c   *cycle // nil for a tailer before its first cycle
	mem []byte // c's mapped prefix as last seen
	off int64  // a slot boundary
	seq uint32 // the sequence number of the next message at or after off
}

func (c *cycle) walkFrom(seq uint32, off int64) walker {
	return walker{c: c, mem: c.mem(), off: off, seq: seq}
}

// header loads the slot header at the walker's position. A file that ends
// there, with neither a free slot nor an end-of-cycle mark, is corrupt.
func (w *walker) header() (uint64, error) {
	h, ok, err := w.c.header(&w.mem, w.off)
	if err == nil && !ok {
		err = fmt.Errorf("%w: cycle %d: file ends at %d without a free slot", ErrCorrupt, w.c.num, w.off)
	}
	return h, err
}

// step moves past the claimed slot with header h at the walker's position.
func (w *walker) step(h uint64) error {
	end, err := w.c.slotEnd(&w.mem, w.off, h)
	if err != nil {
		return err
	}
	w.off = end
	if h&flagMeta == 0 {
		w.seq++
	}
	return nil
}

// toEnd walks to the first free slot, or to the end-of-cycle mark and
// returns errEOF.
func (w *walker) toEnd() error {
	for {
		h, err := w.header()
		switch {
		case err != nil:
			return err
		case h == 0:
			return nil
		case h&flagEOF != 0:
			return errEOF
		}
		if err := w.step(h); err != nil {
			return err
		}
	}
}

// hintPos returns the write hint, checked against the mapping.
func (c *cycle) hintPos() (uint32, int64) {
	seq, off := unpackHint(c.hint.Load())
	if off < dataStart {
		return 0, dataStart
	}
	return seq, off
}

// claimStart is where an appender starts looking for a free slot: where
// this process's last append ended, or the shared hint if it is further
// on. While the local position is unknown (this process has not appended
// to the cycle yet) it is the hint checked against the sparse index.
func (c *cycle) claimStart(retry bool) (uint32, int64) {
	if !retry {
		if seq, off := unpackHint(c.local.Load()); off >= dataStart {
			return seq, off
		}
		return c.checkedHint()
	}
	// The shared hint only when it is more than a page ahead of where this
	// process last appended, and then checked: a valid hint is at most a
	// page behind the end, so walking on from the local position costs no
	// more than two pages of headers, and a damaged hint (far ahead) never
	// sends a claim past the end.
	ls, lo := unpackHint(c.local.Load())
	if _, ho := c.hintPos(); lo >= dataStart && ho <= lo+pageSize {
		return ls, lo
	}
	return c.checkedHint()
}

// checkedHint returns the write hint if a walk from the sparse index
// entry before it lands exactly on it, else the position that walk
// reached, and then puts that in the hint. The hint lies outside the
// header's checksum: a damaged one, in an old cycle that a new appender
// seals or in the latest, must neither fail appends nor send a claim into
// the middle of a message. The walk reads at most IndexSpacing headers
// and a page of slots (more only when the hint is damaged).
func (c *cycle) checkedHint() (uint32, int64) {
	raw := c.hint.Load()
	hs, ho := unpackHint(raw)
	if ho < dataStart {
		hs, ho = 0, dataStart
	}
	mem := c.mem()
	// From the index entry of a message before the hint's: the entry of
	// hs itself may lie past the hint, behind an index array.
	w := c.walkFrom(c.indexed(&mem, max(hs, 1)-1))
	for w.off < ho {
		h, err := w.header()
		if err != nil || h == 0 || h&flagEOF != 0 || w.step(h) != nil {
			break
		}
	}
	seq, off := w.seq, w.off
	if seq == hs && off == ho {
		return hs, ho
	}
	if c.writable && c.hint.CompareAndSwap(raw, packHint(seq, off)) {
		c.q.event(CycleHintRepaired, c.num)
	}
	return seq, off
}

// advanced records that this process appended up to (seq, off), and moves
// the shared hint there when the append crossed into another page: the
// hint is then at most a page behind the first free slot, so another
// appender or a reader looking for the end walks at most a page of slot
// headers, and a lone writer touches the header page once a page of
// messages (the hint's line is a cache and TLB miss each time, at 3,000
// queues a tenth of an append's cost when it was moved every 16).
func (c *cycle) advanced(seq uint32, off, prevOff int64) {
	// A plain store: if appending goroutines race, the position may go
	// back a slot or two, and the next claim walks forward over them.
	shm.StoreRelease(&c.local, packHint(seq, off))
	if off/pageSize != prevOff/pageSize {
		c.advanceHint(seq, off)
	}
}

// end walks from the write hint, checked, to the first free slot. It
// returns errEOF (with the EOF header's position) when the cycle is
// sealed. Not a hot path: seeks, statistics and rolls.
func (c *cycle) end() (uint32, int64, error) {
	if err := c.checkSize(); err != nil {
		return 0, 0, err
	}
	return c.endFrom(c.checkedHint())
}

func (c *cycle) endFrom(seq uint32, off int64) (uint32, int64, error) {
	w := c.walkFrom(seq, off)
	err := w.toEnd()
	return w.seq, w.off, err
}

// claim reserves a slot for n payload bytes at the end of the cycle by
// CAS on the first free header (steps in docs/QUEUE-FORMAT.md). kind is
// flagBusy for a message, flagMeta for an index array, flagEOF to seal.
func (c *cycle) claim(n int, kind uint64, writer uint64) (seq uint32, off int64, hdr uint64, err error) {
	if !c.writable {
		// The file could only be opened read-only (its permissions, an
		// immutable flag): a store into the mapping would kill the process.
		return 0, 0, 0, fmt.Errorf("%w: cycle file %s cannot be written by this process", ErrReadOnly, c.q.cyclePath(c.num))
	}
	size := slotSize(uint64(n))
	if kind == flagEOF {
		size = 0
	}
	seq, off = c.claimStart(false)
	if kind == flagBusy && seq <= maxSeq {
		// The common case, kept short: the slot where this process's last
		// append ended is free and the file holds the header after it.
		mem := c.mem()
		if off+size+8 <= int64(len(mem)) {
			hdr = kind | writer | uint64(n)
			if shm.U64(mem, int(off)).CompareAndSwap(0, hdr) {
				c.advanced(seq+1, off+size, off)
				c.wantPretouch(off + size)
				return seq, off, hdr, nil
			}
		}
	}
	w := c.walkFrom(seq, off)
	fromLocal := true
	checked := false
	for {
		h, err := w.header()
		if err == nil && h != 0 {
			if fromLocal {
				// Another appender wrote here since this process last
				// did: go on from the shared hint if it is further.
				fromLocal = false
				if s2, o2 := c.claimStart(true); o2 > w.off {
					w.seq, w.off = s2, o2
					continue
				}
			}
			if h&flagEOF != 0 {
				return w.seq, w.off, h, errEOF
			}
			err = w.step(h)
			if err == nil {
				continue
			}
		}
		if err != nil {
			if !checked {
				// The hint may be what is damaged: walk from a checked
				// position.
				checked, fromLocal = true, false
				w.seq, w.off = c.checkedHint()
				continue
			}
			return 0, 0, 0, err
		}
		// A free slot.
		if kind == flagBusy && w.seq > maxSeq {
			return 0, 0, 0, ErrCycleFull
		}
		// Leave room for the header after this slot, where the next
		// message or the end-of-cycle mark goes.
		if need := w.off + size + 8; need > int64(len(w.mem)) {
			if w.mem, err = c.grow(need); err != nil {
				return 0, 0, 0, err
			}
		}
		hdr = kind | writer | uint64(n)
		if !shm.U64(w.mem, int(w.off)).CompareAndSwap(0, hdr) {
			continue
		}
		if kind != flagEOF {
			next := w.seq
			if kind == flagBusy {
				next++
			}
			c.advanced(next, w.off+size, w.off)
			if c.writable {
				c.wantPretouch(w.off + size)
			}
		}
		return w.seq, w.off, hdr, nil
	}
}

// advanceHint moves the write hint forward to (seq, off) unless another
// appender moved it further.
func (c *cycle) advanceHint(seq uint32, off int64) {
	nw := packHint(seq, off)
	for {
		cur := c.hint.Load()
		if _, o := unpackHint(cur); o >= off || c.hint.CompareAndSwap(cur, nw) {
			return
		}
	}
}

// seal writes the end-of-cycle mark at the first free slot, unless the
// cycle is sealed already.
func (c *cycle) seal(writer uint64) error {
	_, _, _, err := c.claim(0, flagEOF, writer)
	if err == errEOF {
		return nil
	}
	return err
}

// headerAt loads the slot header at off (tests and tools; off must be
// inside the mapping).
func (c *cycle) headerAt(off int64) uint64 {
	mem := c.mem()
	h, _, _ := c.header(&mem, off)
	return h
}
