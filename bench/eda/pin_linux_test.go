package eda

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinThread: a pinned goroutine's thread may run on exactly one CPU,
// the i-th of those the process may use.
func TestPinThread(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Skip(err)
	}
	var cpus []int
	for cpu := 0; len(cpus) < allowed.Count(); cpu++ {
		if allowed.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
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
