package shm

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

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
