package eda

import (
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its thread and binds the
// thread to the i-th CPU (wrapping around) of those the process may use.
func pinThread(i int) error {
	runtime.LockOSThread()
	_, one, ok, err := nthAllowedCPU(i)
	if err != nil || !ok {
		return err
	}
	return unix.SchedSetaffinity(0, &one)
}

// nthAllowedCPU returns the calling thread's CPU set and a set of just
// its i-th CPU (wrapping around); ok is false when the set is empty.
func nthAllowedCPU(i int) (allowed, one unix.CPUSet, ok bool, err error) {
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return allowed, one, false, err
	}
	n := allowed.Count()
	if n == 0 {
		return allowed, one, false, nil
	}
	want := i % n
	for cpu := 0; ; cpu++ {
		if !allowed.IsSet(cpu) {
			continue
		}
		if want == 0 {
			one.Set(cpu)
			return allowed, one, true, nil
		}
		want--
	}
}

// startOn starts cmd from a thread bound to the i-th CPU (wrapping
// around) of those the process may use, so that the child and every
// thread it makes inherit the binding from the first instruction; the
// thread's own binding is put back afterwards.
func startOn(cmd *exec.Cmd, i int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, one, ok, err := nthAllowedCPU(i)
	if err != nil {
		return err
	}
	if !ok {
		return cmd.Start()
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return err
	}
	err = cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &before); rerr != nil && err == nil {
		// The thread stays bound: keep it locked to this goroutine
		// rather than let it serve others.
		runtime.LockOSThread()
		err = rerr
	}
	return err
}

// childAttr has the kernel kill a child process when its parent dies, so
// that an interrupted run leaves no children behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
