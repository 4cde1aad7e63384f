//go:build linux || darwin || windows

package shm

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/cespare/xxhash/v2"
)

// Every file of the project starts the same way: an 8-byte magic number,
// a uint32 format version at offset 8, and a header of a fixed size whose
// first sumOff bytes are covered by an xxhash64 checksum stored at
// sumOff. The version is read before the checksum, so that a later
// version may change everything after it.

// CheckHeader validates that prefix, for a reader of the versions oldest
// to newest. b holds the file's first bytes (up to size of them) and
// fileSize is the file's length. Each failure wraps its own sentinel:
// ErrEmpty, ErrForeign, ErrTruncated, ErrVersion or ErrCorrupt.
func CheckHeader(b []byte, fileSize int64, magic string, oldest, newest uint32, size, sumOff int) error {
	le := binary.LittleEndian
	switch {
	case fileSize == 0:
		return ErrEmpty
	case len(b) < len(magic) || string(b[:len(magic)]) != magic:
		return fmt.Errorf("%w: wrong magic number", ErrForeign)
	case len(b) < 12:
		return fmt.Errorf("%w: %d bytes, the header alone needs %d", ErrTruncated, fileSize, size)
	}
	if v := le.Uint32(b[8:]); v < oldest || v > newest {
		if oldest == newest {
			return fmt.Errorf("%w: file has version %d, this build reads version %d", ErrVersion, v, newest)
		}
		return fmt.Errorf("%w: file has version %d, this build reads versions %d to %d", ErrVersion, v, oldest, newest)
	}
	if len(b) < size || fileSize < int64(size) {
		return fmt.Errorf("%w: %d bytes, the header alone needs %d", ErrTruncated, fileSize, size)
	}
	if got, want := le.Uint64(b[sumOff:]), xxhash.Sum64(b[:sumOff]); got != want {
		return fmt.Errorf("%w: header checksum %#x, expected %#x", ErrCorrupt, got, want)
	}
	return nil
}

// Attach joins the processes that have the shared file f open: each holds
// a shared flock while it uses the file, so one that gets the lock
// exclusively (alone) knows no other process has it open and may finish
// what dead processes left behind; it must then call Flock(f, false,
// false) to share. It also checks f is a regular file and returns its
// first n bytes (fewer if it is shorter) and its size.
func Attach(f *os.File, readOnly bool, n int) (head []byte, size int64, alone bool, err error) {
	alone = !readOnly && Flock(f, true, true) == nil
	if !alone {
		if err := Flock(f, false, false); err != nil {
			return nil, 0, false, err
		}
	}
	st, err := f.Stat()
	if err != nil {
		return nil, 0, false, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, false, fmt.Errorf("%w: %s is not a regular file", ErrForeign, f.Name())
	}
	head = make([]byte, min(st.Size(), int64(n)))
	if _, err := f.ReadAt(head, 0); err != nil && err != io.EOF {
		return nil, 0, false, err
	}
	return head, st.Size(), alone, nil
}

// RewriteVersion writes head, the first sumOff+8 bytes of f, back with
// version in place of the file's and the checksum made again: one write,
// so that a crash leaves the old header or the new one. It is for a
// version that changes what words mean, not where they are, and only for
// a caller that has f to itself (an exclusive flock).
func RewriteVersion(f *os.File, head []byte, version uint32, sumOff int) error {
	b := make([]byte, sumOff+8)
	copy(b, head)
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint64(b[sumOff:], xxhash.Sum64(b[:sumOff]))
	if _, err := f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("upgrade %s to format version %d: %w", f.Name(), version, err)
	}
	return nil
}
