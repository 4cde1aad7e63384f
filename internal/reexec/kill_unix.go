//go:build unix

package reexec

import (
	"os"
	"syscall"
)

func kill(p *os.Process) error { return p.Signal(syscall.SIGKILL) }

func killedState(st *os.ProcessState) bool {
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
