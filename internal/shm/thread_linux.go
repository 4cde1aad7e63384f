package shm

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

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
