package reexec

import (
	"os"

	"golang.org/x/sys/windows"
)

// Windows has no SIGSTOP: ntdll's NtSuspendProcess suspends every thread
// of a process, which is what a debugger's pause and Process Explorer's
// "Suspend" do.
var (
	ntdll            = windows.NewLazySystemDLL("ntdll.dll")
	ntSuspendProcess = ntdll.NewProc("NtSuspendProcess")
	ntResumeProcess  = ntdll.NewProc("NtResumeProcess")
)

// Pause stops process p where it is, as kill -STOP does on Unix.
func Pause(p *os.Process) error { return call(ntSuspendProcess, p) }

// Resume lets a paused process go on.
func Resume(p *os.Process) error { return call(ntResumeProcess, p) }

func call(proc *windows.LazyProc, p *os.Process) error {
	h, err := windows.OpenProcess(windows.PROCESS_SUSPEND_RESUME, false, uint32(p.Pid))
	if err != nil {
		return os.NewSyscallError("OpenProcess", err)
	}
	defer windows.CloseHandle(h)
	if st, _, _ := proc.Call(uintptr(h)); st != 0 {
		return os.NewSyscallError(proc.Name, windows.NTStatus(st))
	}
	return nil
}
