package shm

import (
	"sync/atomic"
	"unsafe"
)

// View is the mapped prefix of a Region as its users see it, read without
// a lock while another goroutine grows it. The prefix never moves, only
// its length grows, so a View keeps the address and the length inline, in
// its owner's cache line: a pointer to a slice header would cost one more
// cache miss on every access.
type View struct {
	base atomic.Pointer[byte]
	n    atomic.Int64
}

// Set publishes b as the prefix. Every b but the first must start where
// the first did (a Region's Extend guarantees it) and be no shorter.
func (v *View) Set(b []byte) {
	if len(b) == 0 {
		return
	}
	p := unsafe.SliceData(b)
	if old := v.base.Load(); old == nil {
		v.base.Store(p)
	} else if old != p || len(b) < int(v.n.Load()) {
		panic("shm: View.Set: the prefix moved or shrank")
	}
	v.n.Store(int64(len(b)))
}

// Bytes returns the prefix published last (nil before the first Set).
func (v *View) Bytes() []byte {
	n := v.n.Load()
	if n == 0 {
		return nil
	}
	return unsafe.Slice(v.base.Load(), n)
}
