//go:build unix

package reexec

import (
	"os"
	"syscall"
)

// Pause stops process p where it is, as kill -STOP does.
func Pause(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// Resume lets a paused process go on.
func Resume(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
