package latency

import (
	"time"
)

// CPUMeter measures CPU time (user + system) over a window: this process
// (getrusage RUSAGE_SELF), its children reaped in the window
// (RUSAGE_CHILDREN), and a list of live processes read from
// /proc/PID/stat (for child processes a benchmark starts; Linux only:
// elsewhere StartCPU with pids fails). Stop the meter
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
