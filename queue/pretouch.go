package queue

import (
	"sync/atomic"

	"github.com/offmap/offmap/internal/shm"
)

// Pretouching. The first write to each page of a cycle file takes a page
// fault that costs microseconds, many times an append. Like Chronicle
// Queue's pretoucher, a background goroutine of the process keeps the file
// grown and its pages faulted in about one block ahead of the appenders,
// so that appends rarely meet a fresh page or a file that must grow.

var pretouchCh = make(chan *cycle, 256)

var pretoucherStarted atomic.Bool

// wantPretouch asks for the pages after end to be prepared, unless they
// are already or a request is pending.
func (c *cycle) wantPretouch(end int64) {
	if !c.pretouchDue(end) || !c.ahead.CompareAndSwap(false, true) {
		return
	}
	if !c.tryRef() {
		c.ahead.Store(false)
		return
	}
	if pretoucherStarted.CompareAndSwap(false, true) {
		go pretoucher()
	}
	select {
	case pretouchCh <- c:
	default:
		c.ahead.Store(false)
		c.release()
	}
}

func pretoucher() {
	// At the lowest priority: zeroing and mapping fresh pages is work
	// for the CPU time appenders and tailers leave idle, not a reason to
	// preempt one of them for a scheduler slice. If it falls behind, an
	// appender faults its pages in itself.
	shm.BackgroundThread()
	for c := range pretouchCh {
		// Requests that came while this one was pending were dropped:
		// go again while the appends have moved on far enough to ask.
		for c.pretouch() {
		}
		c.ahead.Store(false)
		c.release()
	}
}

// pretouch grows the file to one block past the end of the slots and
// faults in the pages between. It reports whether the appends have since
// moved on far enough to want another round.
func (c *cycle) pretouch() bool {
	block, limit := int64(c.q.opts.BlockSize), c.q.meta.MaxCycleSize
	end := c.appendEnd()
	target := min(end+block, limit)
	from := max(c.touched.Load(), end)
	mem, err := c.grow(target)
	if err != nil {
		return false
	}
	// Fault the pages in without holding growMu: this thread runs at the
	// lowest priority, and an appender that must grow the file should not
	// wait behind it. The pretoucher's reference keeps the mapping.
	if to := min(target, int64(len(mem))); c.writable && from < to {
		shm.PopulateWrite(mem[from:to])
	}
	if c.afterPopulate != nil {
		c.afterPopulate()
	}
	for {
		cur := c.touched.Load()
		if cur >= target || c.touched.CompareAndSwap(cur, target) {
			break
		}
	}
	return target < limit && c.pretouchDue(c.appendEnd())
}

// pretouchDue reports whether the pages faulted in end less than half a
// block past end, the end of the slots.
func (c *cycle) pretouchDue(end int64) bool {
	return end+int64(c.q.opts.BlockSize)/2 > c.touched.Load()
}

// appendEnd is where the slots end as far as this process knows: its own
// last append, or the shared hint (at most a page behind another
// process's appends) if that is further.
func (c *cycle) appendEnd() int64 {
	_, end := c.hintPos()
	_, local := unpackHint(c.local.Load())
	return max(end, local)
}
