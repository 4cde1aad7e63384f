package latency

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// userHZ is the unit of /proc/PID/stat times: fixed at 100 by the Linux
// ABI whatever the kernel's tick rate.
const userHZ = 100

// procCPU returns utime + stime of a process (all its threads) in ns.
func procCPU(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("%w: pid %d: %v", ErrProcessGone, pid, err)
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, fmt.Errorf("latency: malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[i+2:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15. A
	// zombie (exited, not yet reaped) still reports its final times.
	if len(f) < 13 {
		return 0, fmt.Errorf("latency: malformed /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("latency: malformed /proc/%d/stat", pid)
	}
	return (ut + st) * (1e9 / userHZ), nil
}
