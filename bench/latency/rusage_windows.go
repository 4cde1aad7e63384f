package latency

import (
	"errors"

	"golang.org/x/sys/windows"
)

// rusage on Windows: this process's times (GetProcessTimes). Windows does
// not add the times of ended child processes to their parent's, so
// children is always 0; list a benchmark's children by pid instead.
func rusage() (self, children int64, err error) {
	self, err = processTimes(windows.CurrentProcess())
	return self, 0, err
}

func procCPU(pid int) (int64, error) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return 0, err
	}
	defer windows.CloseHandle(h)
	return processTimes(h)
}

func processTimes(h windows.Handle) (int64, error) {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, errors.Join(errors.New("GetProcessTimes"), err)
	}
	// Filetime counts 100 ns intervals.
	return (int64(kernel.HighDateTime)<<32 | int64(kernel.LowDateTime) + int64(user.HighDateTime)<<32 | int64(user.LowDateTime)) * 100, nil
}
