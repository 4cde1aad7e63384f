package eda

import (
	"os/exec"
	"runtime"
	"syscall"
)

// pinThread locks the calling goroutine to its thread; macOS has no way to
// bind a thread to a CPU (thread affinity tags are only hints), so the
// thread is left where the scheduler puts it.
func pinThread(int) error {
	runtime.LockOSThread()
	return nil
}

// startOn starts cmd where the scheduler puts it (see pinThread).
func startOn(cmd *exec.Cmd, _ int) error { return cmd.Start() }

// childAttr: macOS has no parent-death signal; children of an interrupted
// run notice their closed stdin instead.
func childAttr() *syscall.SysProcAttr { return nil }
