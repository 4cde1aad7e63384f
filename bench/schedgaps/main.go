//go:build linux

// Command schedgaps runs a command under the kernel's scheduler trace and
// reports every time one of its threads was preempted and kept off its
// CPU for longer than a threshold, and what ran on that CPU instead: the
// answer to "where does my p99.9 come from" for a spinning reader or an
// event loop, when the tail is not in the code but in who else the
// machine runs.
//
//	schedgaps [-min 20us] [-top 20] [-threads] [-buffer-kb 65536] -- command [args...]
//
// It needs root and tracefs (it mounts /sys/kernel/tracing if needed),
// traces the whole machine's sched_switch, sched_process_fork and
// hrtimer_expire_entry events while the command runs, follows the command
// and everything it forks, and puts the tracing settings back afterwards.
// Another tracer running at the same time would be disturbed.
//
// A process stalls when none of its threads runs while one of them,
// preempted, waits for a CPU. (A thread woken from sleep that waits for a
// CPU is not seen: the trace has no wake-up events.) Some tasks' own events never reach the trace (on the VM of
// docs/BENCHMARKS.md, the init process's threads): the switch away from
// them is then placed at the next event on that CPU, at worst the next
// scheduler tick (4 ms at HZ=250), so their share is an upper bound.
// What the trace cannot see at all: time the hypervisor takes a virtual
// CPU away, which looks like the task simply running longer.
//
// Exit status: the command's own when it fails (128+n when signal n ends
// it), 2 for a usage error, 1 when tracing cannot be set up or read.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("schedgaps", flag.ContinueOnError)
	fs.SetOutput(stderr)
	minGap := fs.Duration("min", 20*time.Microsecond, "count stalls and waits at least this long")
	top := fs.Int("top", 20, "how many of the longest stalls to list")
	bufferKB := fs.Int("buffer-kb", 64<<10, "trace buffer per CPU, in KiB")
	threads := fs.Bool("threads", false, "also report each thread: time on a CPU, waits for one and what ran instead")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: schedgaps [flags] -- command [args...]")
		fmt.Fprintln(stderr, "Runs the command under the scheduler trace and reports when its threads were kept off their CPU, and by what.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() == 0:
		fmt.Fprintln(stderr, "schedgaps: no command to run")
		fs.Usage()
		return 2
	case *minGap <= 0:
		fmt.Fprintf(stderr, "schedgaps: -min %v: want a positive duration\n", *minGap)
		return 2
	case *top < 0:
		fmt.Fprintf(stderr, "schedgaps: -top %d: want 0 or more\n", *top)
		return 2
	case *bufferKB < 64 || *bufferKB > 4<<20:
		fmt.Fprintf(stderr, "schedgaps: -buffer-kb %d: want 64 to 4194304\n", *bufferKB)
		return 2
	}
	tr, err := openTracefs()
	if err != nil {
		fmt.Fprintln(stderr, "schedgaps:", err)
		return 1
	}
	// Signals are caught from before tracing starts, so that the
	// settings are always put back: an interrupt from the terminal
	// reaches the command too (same process group), a hang-up or a kill
	// sent to this process is passed on to it. (Caught, not ignored: an
	// ignored signal would stay ignored in the command.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	restore, err := tr.start(*bufferKB)
	put := func() {
		if err := restore(); err != nil {
			fmt.Fprintln(stderr, "schedgaps: putting the tracing settings back:", err)
		}
	}
	if err != nil {
		put()
		fmt.Fprintln(stderr, "schedgaps:", err)
		return 1
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		tr.stop()
		put()
		fmt.Fprintf(stderr, "schedgaps: %v\n", err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGTERM || sig == syscall.SIGHUP {
					cmd.Process.Signal(sig)
				}
			case <-done:
				return
			}
		}
	}()
	runErr := cmd.Wait()
	close(done)
	tr.stop()
	status := 0
	var exit *exec.ExitError
	if errors.As(runErr, &exit) {
		status = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = 128 + int(ws.Signal())
		}
		if status <= 0 {
			status = 1
		}
		fmt.Fprintf(stderr, "schedgaps: %s: %v\n", fs.Arg(0), runErr)
	}
	lost := tr.overruns()
	rep, err := tr.analyse(cmd.Process.Pid, int64(*minGap))
	put()
	if err != nil {
		fmt.Fprintln(stderr, "schedgaps: reading the trace:", err)
		return max(status, 1)
	}
	rep.print(stdout, int64(*minGap), *top, *threads)
	if lost > 0 {
		fmt.Fprintf(stderr, "schedgaps: the trace lost %d events: raise -buffer-kb\n", lost)
	}
	return status
}
