//go:build linux || darwin || windows

package shm

import (
	"errors"
	"fmt"
	"os"
)

// extendZeroed makes f at least size bytes long by writing zeros past its
// end, which gives the new bytes storage (a full disk is ENOSPC here). It
// never writes below the end, so data that other processes write through
// their mappings is safe, and it holds an exclusive flock while it looks
// at the size and writes, so that two processes growing the file at once
// cannot both write zeros over the same new range after one of them has
// put data there. f must not be flocked otherwise (a map file is not
// preallocated after it is attached; a queue's cycle files are never
// flocked); calls on one *os.File are serialised by the caller.
func extendZeroed(f *os.File, size int64) error {
	if err := lockGrowth(f); err != nil {
		return err
	}
	defer unlockGrowth(f)
	st, err := f.Stat()
	if err != nil {
		return err
	}
	for off := st.Size(); off < size; {
		n := min(size-off, int64(len(zeroChunk)))
		if _, err := f.WriteAt(zeroChunk[:n], off); err != nil {
			return fmt.Errorf("preallocate %s (%d bytes): %w", f.Name(), size, noSpace(err))
		}
		off += n
	}
	return nil
}

var zeroChunk [256 << 10]byte

// writeZeros writes zeros over [off, off+n) of f, extending it if it is
// shorter. The range must be the caller's alone: whatever another process
// wrote there is overwritten.
func writeZeros(f *os.File, off, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeroChunk)))
		if _, err := f.WriteAt(zeroChunk[:k], off); err != nil {
			return fmt.Errorf("grow %s: %w", f.Name(), noSpace(err))
		}
		off, n = off+k, n-k
	}
	return nil
}

// ErrWouldBlock is returned by Flock with nonblocking set when another
// open file holds a conflicting lock.
var ErrWouldBlock = errors.New("file is locked by another process")

func prepare(f *os.File, mode os.FileMode, size int64, durable bool, fill func(f *os.File) error) error {
	if err := f.Chmod(mode.Perm()); err != nil {
		return err
	}
	if err := Preallocate(f, size); err != nil {
		return err
	}
	if err := fill(f); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return f.Sync()
}
