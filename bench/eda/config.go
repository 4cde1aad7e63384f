package eda

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// WaitMode is how services wait for messages.
type WaitMode int

const (
	// Loop runs the services of many instances as handlers on a few
	// event-loop goroutines that wait on all their topics at once.
	Loop WaitMode = iota
	// Park is the Chronicle EDA article's loop: poll, and when the topic is empty sleep
	// for 1/8 of the inter-message time.
	Park
	// Block gives each service a goroutine that blocks in its topic.
	Block
)

var waitNames = []string{"loop", "park", "block"}

func (w WaitMode) String() string {
	if w >= 0 && int(w) < len(waitNames) {
		return waitNames[w]
	}
	return fmt.Sprintf("WaitMode(%d)", int(w))
}

// ParseWaitMode reads a wait mode's name.
func ParseWaitMode(s string) (WaitMode, error) {
	for i, n := range waitNames {
		if n == s {
			return WaitMode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown wait mode %q (want %s)", s, strings.Join(waitNames, ", "))
}

// Placement is where instances and services run.
type Placement int

const (
	// InProcess runs every instance in this process.
	InProcess Placement = iota
	// ProcessPerInstance runs each instance (sender, services, receiver)
	// in a process of its own, as the Chronicle EDA article ran one JVM per instance.
	ProcessPerInstance
	// ProcessPerService runs each service, for all instances, in a
	// process of its own; senders and receivers stay in this process.
	ProcessPerService
	// ProcessPerCPU splits the instances into one process per CPU, each
	// with one P (GOMAXPROCS=1) and whole instances: the Go scheduler of
	// each process then never hands goroutines or timers to another CPU.
	ProcessPerCPU
)

var placementNames = []string{"process", "instance", "service", "cpu"}

func (p Placement) String() string {
	if int(p) < len(placementNames) {
		return placementNames[p]
	}
	return fmt.Sprintf("Placement(%d)", int(p))
}

// ParsePlacement reads a placement's name: process, instance, service or cpu.
func ParsePlacement(s string) (Placement, error) {
	for i, n := range placementNames {
		if n == s {
			return Placement(i), nil
		}
	}
	return 0, fmt.Errorf("unknown placement %q (want %s)", s, strings.Join(placementNames, ", "))
}

// Services is the number of services in a chain (and Services+1 topics).
const Services = 5

// Config is one benchmark setting.
type Config struct {
	Instances int
	Rate      float64 // messages per second per instance
	Wait      WaitMode
	Placement Placement
	// Workers is the number of event loops (Loop mode) per process; zero
	// means GOMAXPROCS.
	Workers int
	// Batch is how often a loop releases the sends that are due: at most
	// one wake-up per Batch. Zero releases each send on time (one wake-up
	// per message when idle). A send released late is charged its delay.
	Batch time.Duration
	// PinLoops locks each event loop (Loop mode) to an OS thread bound to
	// one CPU, loop i to the i-th CPU the process may use (in process
	// placements the loops of all processes take the CPUs in turn): a
	// loop's instances then stay in its core's caches instead of following
	// the scheduler from core to core. With ProcessPerCPU it binds each
	// process, every thread of it, to a CPU of its own, in any wait mode.
	PinLoops bool
	pinFrom  int // the CPU index of this process's first loop (children)

	// NoServiceProbes skips the per-service probes (five timestamps and
	// histogram records per message) and keeps only the end-to-end ones.
	NoServiceProbes bool

	Warmup    time.Duration
	Runs      int
	RunLength time.Duration
	// Grace is how long the wait for messages still in flight after the
	// last send goes on without any of them arriving; those missing then
	// count as lost. While they keep arriving it goes on for up to the
	// plan's length again, and those missing then count as late.
	Grace time.Duration

	// Dir is where the topics and the counter map are created (a fresh
	// directory per run); it must exist.
	Dir string
	// Transport makes the transport for a run directory; nil means
	// offmap queues. Process placements need the offmap transport.
	Transport func(dir string) (Transport, error)
	// BrokerPIDs are other processes whose CPU counts toward the run's
	// (a message broker the transport talks to).
	BrokerPIDs []int
	// Exe is the program started for child processes (os.Executable if
	// empty); it must call ChildMain when started with ChildArg first.
	Exe string

	Out      io.Writer // per-run reports (JLBH style); nil for none
	Progress io.Writer // a line per second; nil for none
	// CPUProfile, if set, receives a CPU profile of this process over
	// the measured runs: set-up and warm-up, which at thousands of
	// queues are mostly the kernel creating files, are left out.
	CPUProfile io.Writer
}

// Defaults fills unset fields.
func (c *Config) defaults() {
	if c.Rate == 0 {
		c.Rate = 1000
	}
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.Runs == 0 {
		c.Runs = 3
	}
	if c.RunLength == 0 {
		c.RunLength = 5 * time.Second
	}
	if c.Grace == 0 {
		c.Grace = 10 * time.Second
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
}

// ErrConfig reports an unusable configuration.
var ErrConfig = errors.New("eda: invalid configuration")

func (c *Config) check() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(f, a...)) }
	switch {
	case c.Instances < 1:
		return bad("instances must be at least 1 (got %d)", c.Instances)
	case c.Rate <= 0 || c.Rate > 1e6:
		return bad("rate must be in (0, 1e6] messages per second (got %g)", c.Rate)
	case c.Wait < Loop || c.Wait > Block:
		return bad("unknown wait mode %d", c.Wait)
	case c.Placement < InProcess || c.Placement > ProcessPerCPU:
		return bad("unknown placement %d", c.Placement)
	case c.Warmup < 0 || c.RunLength <= 0 || c.Runs < 1 || c.Batch < 0:
		return bad("durations must be positive and runs at least 1")
	case c.Dir == "":
		return bad("no directory for the topics")
	case c.Placement != InProcess && c.Transport != nil:
		return bad("process placements run offmap queues only")
	}
	return nil
}

// interval is the time between two messages of one instance.
func (c *Config) interval() time.Duration { return time.Duration(float64(time.Second) / c.Rate) }
