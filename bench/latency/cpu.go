package latency

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of /proc/PID/stat times: fixed at 100 by the Linux
// ABI whatever the kernel's tick rate.
const userHZ = 100

// CPUMeter measures CPU time (user + system) over a window: this process
// (getrusage RUSAGE_SELF), its children reaped in the window
// (RUSAGE_CHILDREN), and a list of live processes read from
// /proc/PID/stat (for child processes a benchmark starts). Stop the meter
// before reaping listed children: a child reaped in the window is counted
// from RUSAGE_CHILDREN for its whole life, and is gone from /proc.
type CPUMeter struct {
	pids   []int
	wall   int64
	self   int64
	reaped int64
	listed []int64
}

// CPUUsage is the CPU time used in a window. Percent is the total as a
// percentage of one core: 200 means two cores busy throughout.
type CPUUsage struct {
	WallNanos   int64   `json:"wall_ns"`
	SelfNanos   int64   `json:"self_ns"`
	ReapedNanos int64   `json:"reaped_children_ns"`
	ListedNanos int64   `json:"listed_ns"`
	Percent     float64 `json:"percent_of_one_core"`
}

// StartCPU opens a window now, for this process and the given pids.
func StartCPU(pids ...int) (*CPUMeter, error) {
	m := &CPUMeter{pids: append([]int(nil), pids...), listed: make([]int64, len(pids))}
	var err error
	if m.self, m.reaped, err = rusage(); err != nil {
		return nil, err
	}
	for i, pid := range pids {
		if m.listed[i], err = procCPU(pid); err != nil {
			return nil, err
		}
	}
	m.wall = Nanotime()
	return m, nil
}

// Read returns the usage since StartCPU; call it any number of times.
func (m *CPUMeter) Read() (CPUUsage, error) {
	wall := Nanotime()
	self, reaped, err := rusage()
	if err != nil {
		return CPUUsage{}, err
	}
	u := CPUUsage{WallNanos: wall - m.wall, SelfNanos: self - m.self, ReapedNanos: reaped - m.reaped}
	for i, pid := range m.pids {
		t, err := procCPU(pid)
		if err != nil {
			return CPUUsage{}, err
		}
		u.ListedNanos += t - m.listed[i]
	}
	if u.WallNanos > 0 {
		u.Percent = 100 * float64(u.SelfNanos+u.ReapedNanos+u.ListedNanos) / float64(u.WallNanos)
	}
	return u, nil
}

// Wall returns the window's length as a Duration.
func (u CPUUsage) Wall() time.Duration { return time.Duration(u.WallNanos) }

func rusage() (self, children int64, err error) {
	var ru unix.Rusage
	if err = unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, err
	}
	self = unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime)
	if err = unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, 0, err
	}
	return self, unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime), nil
}

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
