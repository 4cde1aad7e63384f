package eda

import (
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its thread and binds the
// thread to the i-th CPU (wrapping around) of those the process may use.
func pinThread(i int) error {
	runtime.LockOSThread()
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return err
	}
	n := allowed.Count()
	if n == 0 {
		return nil
	}
	want := i % n
	for cpu := 0; ; cpu++ {
		if !allowed.IsSet(cpu) {
			continue
		}
		if want > 0 {
			want--
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		return unix.SchedSetaffinity(0, &one)
	}
}

// childAttr has the kernel kill a child process when its parent dies, so
// that an interrupted run leaves no children behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
