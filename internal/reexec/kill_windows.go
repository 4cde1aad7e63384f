package reexec

import (
	"os"

	"golang.org/x/sys/windows"
)

// killedCode is the exit code Kill gives a process on Windows: 128 + 9,
// as a shell reports a SIGKILL, and not 1 as os.Process.Kill gives,
// which a failing helper gives too.
const killedCode = 137

func kill(p *os.Process) error {
	h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, uint32(p.Pid))
	if err != nil {
		return os.NewSyscallError("OpenProcess", err)
	}
	defer windows.CloseHandle(h)
	return os.NewSyscallError("TerminateProcess", windows.TerminateProcess(h, killedCode))
}

func killedState(st *os.ProcessState) bool { return st.ExitCode() == killedCode }
