package queue

import "github.com/offmap/offmap/internal/shm"

// recordIndex writes the sparse-index entry for message seq at off. Index
// arrays are claimed as metadata slots at the end of the cycle; when two
// appenders race to add one, the loser's slot stays unused.
func (c *cycle) recordIndex(seq uint32, off int64, writer uint64) {
	j := int64(seq) >> c.q.spacing
	a := j / indexEntries
	if a >= l1Entries {
		return // index full: seeks past here scan from the last entry
	}
	arr := int64(c.l1[a].Load())
	if arr == 0 {
		_, at, _, err := c.claim(indexArraySlot, flagMeta, writer)
		if err != nil {
			return
		}
		c.l1[a].CompareAndSwap(0, uint64(at+8))
		arr = int64(c.l1[a].Load())
	}
	mem := c.mem()
	if e := arr + (j%indexEntries)*8; c.validArray(mem, arr) {
		shm.U64(mem, int(e)).Store(uint64(off))
	}
}

// validArray checks an index array offset read from the file.
func (c *cycle) validArray(mem []byte, arr int64) bool {
	// (arr <= len-size, not arr+size <= len: arr is read from the file,
	// and the sum could wrap.)
	return arr >= dataStart+8 && arr&7 == 0 && arr <= int64(len(mem))-indexArrayBytes
}

// find returns the position of message seq in the cycle, starting from
// the nearest entry of the sparse index at or before it.
func (c *cycle) find(seq uint32) (uint32, int64, error) {
	mem := c.mem()
	w := c.walkFrom(c.indexed(&mem, seq))
	for w.seq != seq {
		h, err := w.header()
		if err != nil {
			return 0, 0, err
		}
		if h == 0 || h&flagEOF != 0 {
			return 0, 0, ErrNotFound
		}
		if err := w.step(h); err != nil {
			return 0, 0, err
		}
	}
	return w.seq, w.off, nil
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
		if off < dataStart || off&7 != 0 || off > int64(len(*mem))-8 {
			continue
		}
		if h := shm.U64(*mem, int(off)).Load(); h != 0 && h&(flagMeta|flagEOF) == 0 {
			return uint32(j << c.q.spacing), off
		}
	}
	return 0, dataStart
}
