package shm

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// On macOS a token is the holder's pid in the low 32 bits and the low 32
// bits of its start time in the high 32 bits: macOS has no open file
// description locks (its fcntl locks belong to the process and fall with
// any close of the file by it, and flock locks cannot be tested without
// taking them), but it has no pid namespaces either, and sysctl answers
// for every user's processes, so pid and start time are conclusive. The
// start time tells a recycled pid apart.

func tokenPID(t Token) int { return int(uint32(t)) }

func takeToken(syscall.RawConn) (Token, error) {
	pid := os.Getpid()
	start, _, err := procStart(pid)
	if err != nil {
		return 0, fmt.Errorf("the start time of this process: %w", err)
	}
	return Token(uint64(uint32(pid)) | uint64(uint32(start))<<32), nil
}

// tokenAlive reports whether the process named by t still runs: not gone,
// not a zombie, and not a newer process that reuses the pid.
func tokenAlive(_ syscall.RawConn, t Token) bool {
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
		return true // not known: count it alive
	case dead:
		return false
	}
	return uint32(start) == uint32(t>>32)
}

// szomb is p_stat of a zombie (SZOMB in <sys/proc.h>).
const szomb = 5

// procStart returns the start time of process pid, in microseconds since
// 1970 (p_starttime of sysctl kern.proc.pid.PID, what ps shows as
// STARTED), and whether it is dead: gone, or a zombie. The sysctl answers
// for every user's processes. For a pid that does not exist it succeeds
// with no entry, which golang.org/x/sys reports as EIO.
func procStart(pid int) (start uint64, dead bool, err error) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	switch {
	case errors.Is(err, unix.EIO) || errors.Is(err, unix.ESRCH):
		return 0, true, nil
	case err != nil:
		return 0, false, err
	case int(k.Proc.P_pid) != pid:
		return 0, true, nil
	}
	tv := k.Proc.P_starttime
	start = uint64(tv.Sec)*1e6 + uint64(tv.Usec)
	return start, k.Proc.P_stat == szomb, nil
}

// BackgroundThread dedicates the calling goroutine's OS thread to it for
// good and puts that thread in the background band (setpriority
// PRIO_DARWIN_THREAD, PRIO_DARWIN_BG: the lowest CPU priority, and
// throttled disk I/O), for work that should run in the CPU time
// latency-critical threads leave idle, such as faulting in file pages
// ahead of the appenders. It needs no privilege.
func BackgroundThread() error {
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_DARWIN_THREAD, 0, unix.PRIO_DARWIN_BG); err != nil {
		return fmt.Errorf("shm: move this thread to the background band: %w", err)
	}
	return nil
}
