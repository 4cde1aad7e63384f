package values

import (
	"errors"
	"math"
	"sync/atomic"

	"github.com/offmap/offmap/internal/shm"
)

// Guard records whether the memory behind a set of handles is still
// open. The owner of the memory (a map) closes it before releasing the
// memory; every handle checks it before each use.
type Guard struct {
	closed atomic.Bool
	what   string
}

// NewGuard returns an open guard; what names the memory in messages.
func NewGuard(what string) *Guard { return &Guard{what: what} }

// Close marks the memory closed: handles fail from now on.
func (g *Guard) Close() { g.closed.Store(true) }

// Closed reports whether Close was called.
func (g *Guard) Closed() bool { return g.closed.Load() }

// ErrMisaligned is returned when a handle is asked for memory that is too
// short or not naturally aligned for atomic access.
var ErrMisaligned = errors.New("values: memory too short or misaligned for an atomic handle")

func fail(g *Guard, kind string) {
	if g == nil {
		panic("values: use of a zero " + kind + " handle (acquire it from a map)")
	}
	panic("values: " + kind + " handle used after " + g.what + " was closed")
}

func at8(b []byte) bool { return len(b) >= 8 && shm.Aligned(b, 8) }
func at4(b []byte) bool { return len(b) >= 4 && shm.Aligned(b, 4) }

// Int64 is an int64 in shared memory.
type Int64 struct {
	v *atomic.Int64
	g *Guard
}

// NewInt64 returns a handle on the 8 bytes at b, which must be 8-byte
// aligned and stay mapped until g is closed.
func NewInt64(b []byte, g *Guard) (Int64, error) {
	if !at8(b) || g == nil {
		return Int64{}, ErrMisaligned
	}
	return Int64{v: shm.I64(b, 0), g: g}, nil
}

func (h Int64) check() {
	if h.g == nil || h.g.closed.Load() {
		fail(h.g, "Int64")
	}
}

// Load returns the value.
func (h Int64) Load() int64 { h.check(); return h.v.Load() }

// Store sets the value.
func (h Int64) Store(x int64) { h.check(); h.v.Store(x) }

// Add adds delta and returns the new value.
func (h Int64) Add(delta int64) int64 { h.check(); return h.v.Add(delta) }

// Prefetch starts bringing the value's cache line in, to be changed soon,
// without waiting for it: a loop that updates many counters calls it for
// the next one while it works on the current one. It does not check the
// guard: a prefetch of unmapped memory is harmless.
func (h Int64) Prefetch() {
	if h.v != nil {
		shm.PrefetchWriteInt64(h.v)
	}
}

// Swap sets the value and returns the old one.
func (h Int64) Swap(x int64) int64 { h.check(); return h.v.Swap(x) }

// CompareAndSwap sets the value to new if it is old.
func (h Int64) CompareAndSwap(old, new int64) bool {
	h.check()
	return h.v.CompareAndSwap(old, new)
}

// Uint64 is a uint64 in shared memory.
type Uint64 struct {
	v *atomic.Uint64
	g *Guard
}

// NewUint64 returns a handle on the 8 bytes at b (8-byte aligned).
func NewUint64(b []byte, g *Guard) (Uint64, error) {
	if !at8(b) || g == nil {
		return Uint64{}, ErrMisaligned
	}
	return Uint64{v: shm.U64(b, 0), g: g}, nil
}

func (h Uint64) check() {
	if h.g == nil || h.g.closed.Load() {
		fail(h.g, "Uint64")
	}
}

// Load returns the value.
func (h Uint64) Load() uint64 { h.check(); return h.v.Load() }

// Store sets the value.
func (h Uint64) Store(x uint64) { h.check(); h.v.Store(x) }

// Add adds delta (wrapping) and returns the new value.
func (h Uint64) Add(delta uint64) uint64 { h.check(); return h.v.Add(delta) }

// Swap sets the value and returns the old one.
func (h Uint64) Swap(x uint64) uint64 { h.check(); return h.v.Swap(x) }

// CompareAndSwap sets the value to new if it is old.
func (h Uint64) CompareAndSwap(old, new uint64) bool {
	h.check()
	return h.v.CompareAndSwap(old, new)
}

// Int32 is an int32 in shared memory.
type Int32 struct {
	v *atomic.Int32
	g *Guard
}

// NewInt32 returns a handle on the 4 bytes at b (4-byte aligned).
func NewInt32(b []byte, g *Guard) (Int32, error) {
	if !at4(b) || g == nil {
		return Int32{}, ErrMisaligned
	}
	return Int32{v: shm.I32(b, 0), g: g}, nil
}

func (h Int32) check() {
	if h.g == nil || h.g.closed.Load() {
		fail(h.g, "Int32")
	}
}

// Load returns the value.
func (h Int32) Load() int32 { h.check(); return h.v.Load() }

// Store sets the value.
func (h Int32) Store(x int32) { h.check(); h.v.Store(x) }

// Add adds delta and returns the new value.
func (h Int32) Add(delta int32) int32 { h.check(); return h.v.Add(delta) }

// Swap sets the value and returns the old one.
func (h Int32) Swap(x int32) int32 { h.check(); return h.v.Swap(x) }

// CompareAndSwap sets the value to new if it is old.
func (h Int32) CompareAndSwap(old, new int32) bool {
	h.check()
	return h.v.CompareAndSwap(old, new)
}

// Float64 is a float64 in shared memory, stored as its IEEE 754 bits.
type Float64 struct {
	v *atomic.Uint64
	g *Guard
}

// NewFloat64 returns a handle on the 8 bytes at b (8-byte aligned).
func NewFloat64(b []byte, g *Guard) (Float64, error) {
	if !at8(b) || g == nil {
		return Float64{}, ErrMisaligned
	}
	return Float64{v: shm.U64(b, 0), g: g}, nil
}

func (h Float64) check() {
	if h.g == nil || h.g.closed.Load() {
		fail(h.g, "Float64")
	}
}

// Load returns the value.
func (h Float64) Load() float64 { h.check(); return math.Float64frombits(h.v.Load()) }

// Store sets the value.
func (h Float64) Store(x float64) { h.check(); h.v.Store(math.Float64bits(x)) }

// Add adds delta with a compare-and-swap loop and returns the new value.
func (h Float64) Add(delta float64) float64 {
	h.check()
	for {
		old := h.v.Load()
		n := math.Float64frombits(old) + delta
		if h.v.CompareAndSwap(old, math.Float64bits(n)) {
			return n
		}
	}
}

// CompareAndSwap sets the value to new if its bits equal old's bits.
func (h Float64) CompareAndSwap(old, new float64) bool {
	h.check()
	return h.v.CompareAndSwap(math.Float64bits(old), math.Float64bits(new))
}
