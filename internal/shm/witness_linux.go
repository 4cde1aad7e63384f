package shm

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux a token is the offset of a byte of the shared file on which its
// holder keeps an open file description lock (fcntl F_OFD_SETLK, a write
// lock of length 1) for as long as it has the file open:
//
//	bit  63      0
//	bit  62      1: offsets in [2^62, 2^63), far past any file's end
//	bits 22..61  random, chosen when the file is opened
//	bits  0..21  the holder's pid in its own pid namespace (display only)
//
// Such a lock belongs to the open file, not to a pid: the kernel drops it
// when the last descriptor of that open file is closed, which a process
// killed in any way does on exit, and every process that has the same
// file (inode) open sees it with F_OFD_GETLK, whatever its pid namespace,
// uid, or view of /proc. Locks past the end of a file neither change its
// size nor need storage. Two live processes cannot hold the same byte: a
// conflict on taking one means another process has chosen it, and another
// number is drawn.

const (
	tokenMark = 1 << 62
	pidBits   = 22 // pid_max is at most 2^22 (PID_MAX_LIMIT)
)

func tokenPID(t Token) int { return int(t & (1<<pidBits - 1)) }

// takeToken locks a byte of the file of its own and returns its token.
func takeToken(rc syscall.RawConn) (Token, error) {
	pid := uint64(os.Getpid()) & (1<<pidBits - 1)
	for range 64 {
		t := Token(tokenMark | randomBits()<<pidBits&(tokenMark-1) | pid)
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(t), Len: 1}
		err := ofd(rc, unix.F_OFD_SETLK, &lk)
		switch {
		case err == nil:
			return t, nil
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES):
			continue // another process holds this byte: draw again
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
			return 0, fmt.Errorf("%w (%v)", ErrNoFileLocks, err)
		default:
			return 0, err
		}
	}
	return 0, errors.New("no free witness byte found in 64 draws")
}

// tokenAlive asks whether another open file holds t's byte. A token not
// of the shape above was made by no process of this format: it is left by
// damage, or by a process of another machine or version, and is dead.
func tokenAlive(rc syscall.RawConn, t Token) bool {
	if t&(3<<62) != tokenMark {
		return false
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(t), Len: 1}
	if err := ofd(rc, unix.F_OFD_GETLK, &lk); err != nil {
		return true // not known: count it alive
	}
	return lk.Type != unix.F_UNLCK
}

// ofd runs an open file description lock command on the file of rc.
func ofd(rc syscall.RawConn, cmd int, lk *unix.Flock_t) error {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		for err = unix.FcntlFlock(fd, cmd, lk); err == unix.EINTR; {
			err = unix.FcntlFlock(fd, cmd, lk)
		}
	}); cerr != nil {
		return cerr
	}
	return err
}
