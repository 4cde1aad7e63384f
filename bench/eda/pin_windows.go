package eda

import (
	"os/exec"
	"runtime"
	"syscall"
)

// pinThread locks the calling goroutine to its thread and leaves the
// thread where the scheduler puts it: the chain is measured on Linux
// only (SetThreadAffinityMask would bind it here).
func pinThread(int) error {
	runtime.LockOSThread()
	return nil
}

// startOn starts cmd where the scheduler puts it (see pinThread).
func startOn(cmd *exec.Cmd, _ int) error { return cmd.Start() }

// childAttr: Windows has no parent-death signal; children of an interrupted
// run notice their closed stdin instead.
func childAttr() *syscall.SysProcAttr { return nil }
