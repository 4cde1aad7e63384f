package eda

import (
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

// childAttr: Windows has no parent-death signal; children of an interrupted
// run notice their closed stdin instead.
func childAttr() *syscall.SysProcAttr { return nil }
