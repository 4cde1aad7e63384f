package shm

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

// This file and copy_*.go hold the package's pointer arithmetic. Callers
// pass offsets they have validated against the file's layout; the checks
// here are the last line of defence and panic on a programming error,
// never on file content.

// The accessors below are small enough to inline: the slice expression
// does the bounds check, and alignment is checked with one AND.

// U64 returns the 8-byte aligned word at b[off:] as an atomic.
func U64(b []byte, off int) *atomic.Uint64 {
	p := unsafe.Pointer(unsafe.SliceData(b[off : off+8]))
	if uintptr(p)&7 != 0 {
		panic(errMisaligned)
	}
	return (*atomic.Uint64)(p)
}

// U32 returns the 4-byte aligned word at b[off:] as an atomic.
func U32(b []byte, off int) *atomic.Uint32 {
	p := unsafe.Pointer(unsafe.SliceData(b[off : off+4]))
	if uintptr(p)&3 != 0 {
		panic(errMisaligned)
	}
	return (*atomic.Uint32)(p)
}

// I64 returns the 8-byte aligned word at b[off:] as an atomic int64.
func I64(b []byte, off int) *atomic.Int64 { return (*atomic.Int64)(unsafe.Pointer(U64(b, off))) }

// I32 returns the 4-byte aligned word at b[off:] as an atomic int32.
func I32(b []byte, off int) *atomic.Int32 { return (*atomic.Int32)(unsafe.Pointer(U32(b, off))) }

// errMisaligned is a programming error: layouts align every shared word.
var errMisaligned = errors.New("shm: misaligned atomic word")

// U64s returns n consecutive 8-byte words starting at b[off:].
func U64s(b []byte, off, n int) []atomic.Uint64 {
	p := unsafe.Pointer(unsafe.SliceData(b[off : off+n*8]))
	if uintptr(p)&7 != 0 {
		panic(errMisaligned)
	}
	return unsafe.Slice((*atomic.Uint64)(p), n)
}

// U32s returns n consecutive 4-byte words starting at b[off:].
func U32s(b []byte, off, n int) []atomic.Uint32 {
	p := unsafe.Pointer(unsafe.SliceData(b[off : off+n*4]))
	if uintptr(p)&3 != 0 {
		panic(errMisaligned)
	}
	return unsafe.Slice((*atomic.Uint32)(p), n)
}

// Words returns n consecutive 8-byte words at b[off:] for code that holds
// a lock over them (bitmaps): plain loads and stores.
func Words(b []byte, off, n int) []uint64 {
	p := unsafe.Pointer(unsafe.SliceData(b[off : off+n*8]))
	if uintptr(p)&7 != 0 {
		panic(errMisaligned)
	}
	return unsafe.Slice((*uint64)(p), n)
}

// Overlay returns b[off:] viewed as a *T. T must be a struct of fixed-size,
// pointer-free fields (atomics and integers), 8-byte aligned.
func Overlay[T any](b []byte, off int) *T {
	var zero T
	p := unsafe.Pointer(unsafe.SliceData(b[off : off+int(unsafe.Sizeof(zero))]))
	if uintptr(p)&7 != 0 {
		panic(errMisaligned)
	}
	return (*T)(p)
}

// Heap returns size zeroed bytes of ordinary Go memory aligned to 64
// bytes: the stand-in for a mapping in tests run with the race detector,
// which cannot see mapped memory.
func Heap(size int) []byte {
	words := make([]uint64, (size+64+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
	skip := int((64 - uintptr(unsafe.Pointer(&b[0]))%64) % 64)
	return b[skip : skip+size : skip+size]
}

// Aligned reports whether b starts at a multiple of align.
func Aligned(b []byte, align int) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(align) == 0
}

// Prefetch starts bringing the cache line at b[off] in, to be read or
// written soon: an event loop calls it for the next item's memory while it
// works on the current one, so that the cache and TLB misses overlap. It
// does nothing when off is outside b.
func Prefetch(b []byte, off int) {
	if off >= 0 && off < len(b) {
		prefetch(uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(off))
	}
}

// PrefetchWriteInt64 starts bringing in the line holding v to be changed
// soon (an atomic add): it asks for the line owned by this core.
func PrefetchWriteInt64(v *atomic.Int64) { prefetchWrite(uintptr(unsafe.Pointer(v))) }

// PrefetchWord is Prefetch for the line holding w.
func PrefetchWord(w *atomic.Uint32) { prefetch(uintptr(unsafe.Pointer(w))) }

// PrefetchObject is Prefetch for the first cache line of *p, a Go object.
func PrefetchObject[T any](p *T) { prefetch(uintptr(unsafe.Pointer(p))) }
