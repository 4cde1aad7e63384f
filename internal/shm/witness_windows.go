package shm

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/windows"
)

// On Windows a token is, as on Linux (witness_linux.go), the offset of a
// byte of the shared file in [2^62, 2^63) that its holder keeps locked
// (LockFileEx, exclusive) for as long as it has the file open. Windows
// byte-range locks belong to the file handle: the system drops them when
// the handle is closed, which it does for a process that dies in any way,
// and a lock past the end of a file changes nothing in it. A waiter asks
// by taking a shared lock on the byte without waiting: refused means the
// holder lives; granted means it is gone, and the waiter lets the byte go
// at once. Windows has no pid namespaces; the pid in the low bits is for
// display only.

const (
	tokenMark = 1 << 62
	pidBits   = 22
)

func tokenPID(t Token) int { return int(t & (1<<pidBits - 1)) }

func takeToken(rc syscall.RawConn) (Token, error) {
	pid := uint64(os.Getpid()) & (1<<pidBits - 1)
	for range 64 {
		t := Token(tokenMark | randomBits()<<pidBits&(tokenMark-1) | pid)
		err := lockToken(rc, t, windows.LOCKFILE_EXCLUSIVE_LOCK)
		switch {
		case err == nil:
			return t, nil
		case errors.Is(err, windows.ERROR_LOCK_VIOLATION):
			continue // another process holds this byte: draw again
		case errors.Is(err, windows.ERROR_NOT_SUPPORTED) || errors.Is(err, windows.ERROR_INVALID_FUNCTION):
			return 0, fmt.Errorf("%w (%v)", ErrNoFileLocks, err)
		default:
			return 0, err
		}
	}
	return 0, errors.New("no free witness byte found in 64 draws")
}

func tokenAlive(rc syscall.RawConn, t Token) bool {
	if t&(3<<62) != tokenMark {
		return false
	}
	switch err := lockToken(rc, t, 0); {
	case err == nil:
		var uerr error
		if cerr := rc.Control(func(fd uintptr) { uerr = unlockByte(windows.Handle(fd), uint64(t)) }); cerr != nil || uerr != nil {
			return true
		}
		return false
	default:
		return true // held (ERROR_LOCK_VIOLATION), or not known: alive
	}
}

// lockToken locks t's byte without waiting.
func lockToken(rc syscall.RawConn, t Token, flags uint32) error {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		ov := windows.Overlapped{Offset: uint32(t), OffsetHigh: uint32(t >> 32)}
		err = windows.LockFileEx(windows.Handle(fd), flags|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ov)
	}); cerr != nil {
		return cerr
	}
	return err
}

// BackgroundThread dedicates the calling goroutine's OS thread to it for
// good and gives it background priority (THREAD_MODE_BACKGROUND_BEGIN:
// the lowest CPU and I/O priority), for work that should run in the CPU
// time latency-critical threads leave idle.
func BackgroundThread() error {
	runtime.LockOSThread()
	const threadModeBackgroundBegin = 0x00010000
	if r, _, err := procSetThreadPriority.Call(uintptr(windows.CurrentThread()), threadModeBackgroundBegin); r == 0 {
		return fmt.Errorf("shm: move this thread to the background: %w", errnoErr(err))
	}
	return nil
}
