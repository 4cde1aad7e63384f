package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Token names a process in a lock word: the pid in the low 32 bits and the
// low 32 bits of the process start time (clock ticks since boot, field 22
// of /proc/PID/stat) in the high 32 bits. The start time tells a recycled
// pid apart from the process that took the lock. A token is never zero.
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
		start, _, err := procStat(pid)
		if err != nil {
			// Without /proc the start time is unknown; pid alone still
			// works, only recycled pids go undetected.
			start = 0
		}
		self.token = MakeToken(pid, start)
	})
	return self.token
}

// procStat returns the start time and the state letter of a process.
func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces
	// or parentheses itself: fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, errors.New("shm: malformed /proc stat")
	}
	fields := bytes.Fields(b[i+2:])
	// fields[0] is field 3 (state); field 22 (starttime) is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, errors.New("shm: malformed /proc stat")
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	return start, fields[0][0], err
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
	start, state, err := procStat(pid)
	if err != nil {
		if os.IsNotExist(err) {
			return false
		}
		return true
	}
	if state == 'Z' || state == 'X' {
		return false
	}
	return uint32(start) == t.StartTime()
}

// BackgroundThread dedicates the calling goroutine's OS thread to it for
// good and gives that thread the lowest priority (nice 19): work that
// should run in the CPU time latency-critical threads leave idle, such as
// faulting in file pages ahead of the appenders, and not take a CPU from
// them for a scheduler slice. Lowering a priority needs no privilege.
func BackgroundThread() error {
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19); err != nil {
		return fmt.Errorf("shm: lower the priority of thread %d: %w", unix.Gettid(), err)
	}
	return nil
}
