//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// tracefs is the kernel's tracing directory.
type tracefs struct{ dir string }

// tracingFiles are the settings start changes and restore puts back.
var tracingFiles = []string{
	"tracing_on",
	"buffer_size_kb",
	"trace_clock",
	"options/record-tgid",
	"options/irq-info",
	"events/sched/sched_switch/enable",
	"events/sched/sched_process_fork/enable",
	"events/timer/hrtimer_expire_entry/enable",
}

// restorable turns what a settings file reads into what writing it back
// takes: the chosen clock of "[local] global ...", the size a buffer
// grows to on first use from "7 (expanded: 1408)".
func restorable(name, v string) string {
	switch name {
	case "trace_clock":
		if i, j := strings.Index(v, "["), strings.Index(v, "]"); i >= 0 && j > i {
			return v[i+1 : j]
		}
	case "buffer_size_kb":
		if _, exp, ok := strings.Cut(v, "(expanded: "); ok {
			return strings.TrimSuffix(exp, ")")
		}
	}
	return v
}

func openTracefs() (*tracefs, error) {
	for _, d := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(filepath.Join(d, "trace")); err == nil {
			return &tracefs{d}, nil
		}
	}
	const d = "/sys/kernel/tracing"
	if err := unix.Mount("nodev", d, "tracefs", 0, ""); err != nil {
		return nil, fmt.Errorf("tracefs is not mounted and mounting it on %s failed (root is needed): %w", d, err)
	}
	if _, err := os.Stat(filepath.Join(d, "events/sched/sched_switch")); err != nil {
		unix.Unmount(d, 0)
		return nil, fmt.Errorf("%s has no sched_switch event: %w", d, err)
	}
	return &tracefs{d}, nil
}

func (t *tracefs) read(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(t.dir, name))
	return strings.TrimSpace(string(b)), err
}

func (t *tracefs) write(name, value string) error {
	f, err := os.OpenFile(filepath.Join(t.dir, name), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if e := f.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("tracefs %s = %s: %w", name, value, err)
	}
	return nil
}

// start clears the trace buffer and turns on the events. restore puts
// back the settings found and returns what it could not; it is safe to
// call after a failed start.
func (t *tracefs) start(bufferKB int) (restore func() error, err error) {
	saved := map[string]string{}
	for _, name := range tracingFiles {
		v, err := t.read(name)
		if err != nil {
			return func() error { return nil }, fmt.Errorf("tracefs: %w (root is needed)", err)
		}
		saved[name] = restorable(name, v)
	}
	restore = func() error {
		var errs []error
		for i := len(tracingFiles) - 1; i >= 0; i-- {
			name := tracingFiles[i]
			if err := t.write(name, saved[name]); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	steps := [][2]string{
		{"tracing_on", "0"},
		{"trace", ""},
		{"buffer_size_kb", strconv.Itoa(bufferKB)},
		// One clock for all CPUs (the default, local, is not
		// synchronised between them), and the header the parser reads.
		{"trace_clock", "mono"},
		{"options/record-tgid", "1"},
		{"options/irq-info", "1"},
		{"events/sched/sched_switch/enable", "1"},
		{"events/sched/sched_process_fork/enable", "1"},
		// Timer events name the task on the CPU at least every tick:
		// they bound a switch the trace lacks (see analyse).
		{"events/timer/hrtimer_expire_entry/enable", "1"},
		{"tracing_on", "1"},
	}
	for _, s := range steps {
		if err := t.write(s[0], s[1]); err != nil {
			return restore, err
		}
	}
	return restore, nil
}

func (t *tracefs) stop() { t.write("tracing_on", "0") }

// overruns sums the events each CPU's buffer lost.
func (t *tracefs) overruns() int64 {
	cpus, _ := filepath.Glob(filepath.Join(t.dir, "per_cpu", "cpu*", "stats"))
	var n int64
	for _, p := range cpus {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "overrun: "); ok {
				x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
		f.Close()
	}
	return n
}

func (t *tracefs) analyse(root int, min int64) (*report, error) {
	f, err := os.Open(filepath.Join(t.dir, "trace"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := analyse(f, root, min)
	if err != nil {
		return nil, err
	}
	if rep.events == 0 {
		return nil, errors.New("no scheduler events recorded")
	}
	return rep, nil
}
