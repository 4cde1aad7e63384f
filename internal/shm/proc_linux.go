package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// procStart returns the start time of process pid, in clock ticks since
// boot (field 22 of /proc/PID/stat), and whether it is dead: gone, or a
// zombie. It is the same with the offmap_portable tag: /proc is what
// Linux has.
//
// It reads /proc/PID/task/PID/stat, the main thread's, which gives the
// same state and start time as /proc/PID/stat (that file reports them from
// the main thread too): user-mode emulators (qemu-user) replace a
// process's own /proc/PID/stat with one of their making, whose start time
// differs from the one other processes read, which made every process
// under emulation judge every other one dead.
func procStart(pid int) (start uint64, dead bool, err error) {
	start, state, err := procStat(pid)
	switch {
	case os.IsNotExist(err):
		return 0, true, nil
	case err != nil:
		return 0, false, err
	}
	return start, state == 'Z' || state == 'X', nil
}

// procStat returns the start time and the state letter of a process.
func procStat(pid int) (start uint64, state byte, err error) {
	p := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/stat")
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
