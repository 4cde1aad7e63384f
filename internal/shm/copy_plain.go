//go:build amd64 && !race

package shm

// On amd64 (total store order, loads not reordered with loads) a plain
// copy is a valid seqlock read: the compiler keeps plain loads ahead of the
// version re-check, an atomic load that consumes the same memory state.

// Load copies len(dst) bytes from src, which another process may be
// writing; the caller validates the result with a seqlock.
func Load(dst, src []byte) { copy(dst, src[:len(dst)]) }

// Store writes src to dst and zeroes dst up to the next multiple of 8.
// dst must hold at least Pad8(len(src)) bytes.
func Store(dst, src []byte) {
	n := copy(dst, src)
	clear(dst[n:Pad8(n)])
}

// Equal compares mem, which another process may be writing, with key.
func Equal(mem, key []byte) bool { return string(mem[:len(key)]) == string(key) }

// Zero clears dst, whose length is a multiple of 8.
func Zero(dst []byte) { clear(dst) }
