package eda

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the calling thread's CPU set and its CPUs in order.
func allowedCPUs(t *testing.T) (unix.CPUSet, []int) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Skip(err)
	}
	return allowed, cpuList(allowed)
}

// cpuList returns the CPUs of set in order.
func cpuList(set unix.CPUSet) []int {
	var cpus []int
	for cpu := 0; len(cpus) < set.Count(); cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// TestPinThread: a pinned goroutine's thread may run on exactly one CPU,
// the i-th of those the process may use.
func TestPinThread(t *testing.T) {
	_, cpus := allowedCPUs(t)
	for i := range len(cpus) + 1 {
		got := make(chan unix.CPUSet, 1)
		errs := make(chan error, 1)
		go func() { // ends locked: its thread exits with it
			if err := pinThread(i); err != nil {
				errs <- err
				return
			}
			var set unix.CPUSet
			unix.SchedGetaffinity(0, &set)
			got <- set
		}()
		select {
		case err := <-errs:
			t.Fatal(err)
		case set := <-got:
			want := cpus[i%len(cpus)]
			if set.Count() != 1 || !set.IsSet(want) {
				t.Fatalf("loop %d: thread may run on %d CPUs (CPU %d: %v), want only CPU %d", i, set.Count(), want, set.IsSet(want), want)
			}
		}
	}
}

// TestPinnedLoops: with pinned event loops, in one process or in one per
// instance, every message still crosses the chain once, and the result
// says the loops were pinned.
func TestPinnedLoops(t *testing.T) {
	for _, p := range []Placement{InProcess, ProcessPerInstance} {
		t.Run(p.String(), func(t *testing.T) {
			cfg := short(t, 3, Loop, p)
			cfg.PinLoops = true
			r := runIntact(t, cfg)
			if !r.Pinned {
				t.Fatal("result does not say the loops were pinned")
			}
		})
	}
}

// affinityEnv makes the test binary print the CPUs each of its threads may
// run on, one line per thread, and exit (TestStartOn's child).
const affinityEnv = "EDA_TEST_PRINT_AFFINITY"

func init() {
	if os.Getenv(affinityEnv) == "" {
		return
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var cpus []string
		for _, cpu := range cpuList(set) {
			cpus = append(cpus, strconv.Itoa(cpu))
		}
		fmt.Println(strings.Join(cpus, ","))
	}
	os.Exit(0)
}

// TestStartOn: a child started with startOn(i) runs every thread on the
// i-th allowed CPU alone, and the starting thread gets its own binding
// back.
func TestStartOn(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	allowed, cpus := allowedCPUs(t)
	for i := range len(cpus) + 1 {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), affinityEnv+"=1")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := startOn(cmd, i); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v: %s", err, out.String())
		}
		lines := strings.Fields(out.String())
		if len(lines) == 0 {
			t.Fatal("the child printed no thread")
		}
		want := strconv.Itoa(cpus[i%len(cpus)])
		for _, l := range lines {
			if l != want {
				t.Fatalf("startOn(%d): a child thread may run on CPUs %s, want only %s (all threads: %q)", i, l, want, lines)
			}
		}
		var after unix.CPUSet
		if err := unix.SchedGetaffinity(0, &after); err != nil {
			t.Fatal(err)
		}
		if after != allowed {
			t.Fatalf("startOn(%d) left the calling thread on %d CPUs, want its %d back", i, after.Count(), allowed.Count())
		}
	}
}

// TestProcessPerCPUPinned: with a process per CPU bound to its CPU, the
// park loop still carries every message once, and the result says so.
func TestProcessPerCPUPinned(t *testing.T) {
	cfg := short(t, 3, Park, ProcessPerCPU)
	cfg.PinLoops = true
	r := runIntact(t, cfg)
	if !r.Pinned {
		t.Fatal("result does not say the processes were pinned")
	}
}
