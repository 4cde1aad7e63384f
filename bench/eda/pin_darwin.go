package eda

import (
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

// childAttr: macOS has no parent-death signal; children of an interrupted
// run notice their closed stdin instead.
func childAttr() *syscall.SysProcAttr { return nil }
