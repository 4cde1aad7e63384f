//go:build linux || darwin

package shm

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Token names a process in a lock word: the pid in the low 32 bits and the
// low 32 bits of the process start time in the high 32 bits (see
// procStart: clock ticks since boot on Linux, microseconds since 1970 on
// macOS). The start time tells a recycled pid apart from the process that
// took the lock. Tokens are compared only on the machine that made them. A
// token is never zero.
type Token uint64

// PID returns the process id in the token.
func (t Token) PID() int { return int(uint32(t)) }

// StartTime returns the low 32 bits of the process start time.
func (t Token) StartTime() uint32 { return uint32(t >> 32) }

// MakeToken builds a token from a pid and a start time.
func MakeToken(pid int, start uint64) Token {
	return Token(uint64(uint32(pid)) | uint64(uint32(start))<<32)
}

var self struct {
	once  sync.Once
	token Token
}

// Self returns the calling process's token.
func Self() Token {
	self.once.Do(func() {
		pid := os.Getpid()
		start, _, err := procStart(pid)
		if err != nil {
			// Without the start time, pid alone still works: only
			// recycled pids go undetected.
			start = 0
		}
		self.token = MakeToken(pid, start)
	})
	return self.token
}

// Alive reports whether the process named by t still runs. A process that
// is gone, a zombie, or a newer process that reuses the pid is dead. When
// the answer cannot be known (no /proc, another pid namespace hiding it)
// the process counts as alive: a live holder must never lose its lock.
func Alive(t Token) bool {
	pid := t.PID()
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return false
	}
	start, dead, err := procStart(pid)
	switch {
	case err != nil:
		return true
	case dead:
		return false
	}
	return uint32(start) == t.StartTime()
}
