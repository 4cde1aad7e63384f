//go:build !amd64 || race

package shm

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// Where plain loads may be reordered (arm64) or where the race detector
// watches (heap-backed regions in tests), seqlock copies go through atomic
// 8-byte words. mem slices start 8-byte aligned and extend to the next
// multiple of 8 (entries are padded), so the last word is in bounds.

func word(mem []byte, i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(mem[i : i+8])))
}

// Load copies len(dst) bytes from src, which another process may be
// writing; the caller validates the result with a seqlock.
func Load(dst, src []byte) {
	n := len(dst)
	i := 0
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], word(src, i).Load())
	}
	if i < n {
		var tmp [8]byte
		binary.LittleEndian.PutUint64(tmp[:], word(src, i).Load())
		copy(dst[i:], tmp[:n-i])
	}
}

// Store writes src to dst and zeroes dst up to the next multiple of 8.
// dst must hold at least Pad8(len(src)) bytes.
func Store(dst, src []byte) {
	n := len(src)
	i := 0
	for ; i+8 <= n; i += 8 {
		word(dst, i).Store(binary.LittleEndian.Uint64(src[i:]))
	}
	if i < n {
		var tmp [8]byte
		copy(tmp[:], src[i:])
		word(dst, i).Store(binary.LittleEndian.Uint64(tmp[:]))
	}
}

// Equal compares mem, which another process may be writing, with key.
func Equal(mem, key []byte) bool {
	n := len(key)
	i := 0
	for ; i+8 <= n; i += 8 {
		if word(mem, i).Load() != binary.LittleEndian.Uint64(key[i:]) {
			return false
		}
	}
	if i < n {
		var tmp [8]byte
		binary.LittleEndian.PutUint64(tmp[:], word(mem, i).Load())
		return string(tmp[:n-i]) == string(key[i:])
	}
	return true
}

// Zero clears dst, whose length is a multiple of 8.
func Zero(dst []byte) {
	for i := 0; i+8 <= len(dst); i += 8 {
		word(dst, i).Store(0)
	}
}
