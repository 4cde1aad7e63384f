package latency

import (
	"errors"
	"fmt"
)

// procCPU would read another process's CPU time: macOS gives it through
// proc_pid_rusage in libproc, which needs cgo. Benchmarks that meter
// their child processes run on Linux.
func procCPU(pid int) (int64, error) {
	return 0, fmt.Errorf("latency: CPU time of process %d: %w", pid, errNoProcCPU)
}

var errNoProcCPU = errors.New("reading another process's CPU time is supported on Linux only")
