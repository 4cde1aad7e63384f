//go:build linux

package main

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Real lines from /sys/kernel/tracing/trace with record-tgid set.
const realSwitch = `      queue.test-19692   (  19692) [000] d..2. 25129.648770: sched_switch: prev_comm=queue.test prev_pid=19692 prev_prio=120 prev_state=R ==> next_comm=memfd:sealed-91 next_pid=17784 next_prio=120`
const realFork = `            bash-19690   (  19690) [001] ..... 25129.640001: sched_process_fork: comm=bash pid=19690 child_comm=bash child_pid=19692`

func TestParseLine(t *testing.T) {
	cases := []struct {
		line string
		want event
		ok   bool
	}{
		{realSwitch, event{ns: 25129648770000, cpu: 0, pid: 19692, tgid: 19692, comm: "queue.test", kind: switchEvent, prevPID: 19692, nextPID: 17784,
			prevComm: "queue.test", nextComm: "memfd:sealed-91", preempted: true}, true},
		{realFork, event{ns: 25129640001000, cpu: 1, pid: 19690, tgid: 19690, comm: "bash", kind: forkEvent, childPID: 19692}, true},
		// A comm with blanks and dashes, no tgid known, sleeping.
		{`  Web Content-x-42   (-------) [013] d..2. 7.5: sched_switch: prev_comm=Web Content-x prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/13 next_pid=0 next_prio=120`,
			event{ns: 7500000000, cpu: 13, pid: 42, comm: "Web Content-x", kind: switchEvent, prevPID: 42, nextPID: 0, prevComm: "Web Content-x", nextComm: "swapper/13"}, true},
		// Without record-tgid.
		{`  a-5 [001] d..2. 1.000001: sched_switch: prev_comm=a prev_pid=5 prev_prio=120 prev_state=R+ ==> next_comm=b next_pid=6 next_prio=120`,
			event{ns: 1000001000, cpu: 1, pid: 5, comm: "a", kind: switchEvent, prevPID: 5, nextPID: 6, prevComm: "a", nextComm: "b", preempted: true}, true},
		// Any other event says which task is on the CPU; a comm may
		// hold ": ".
		{`          <idle>-0       (-------) [001] d.h1. 25890.327674: hrtimer_expire_entry: hrtimer=000000002998a44d function=tick_nohz_handler now=25890304086577`,
			event{ns: 25890327674000, cpu: 1, pid: 0, comm: "<idle>", kind: otherEvent}, true},
		{`  odd: name-7 (7) [000] d.h1. 2.5: irq_handler_entry: irq=4 name=ttyS0`,
			event{ns: 2500000000, cpu: 0, pid: 7, tgid: 7, comm: "odd: name", kind: otherEvent}, true},
		{"# tracer: nop", event{}, false},
		{`  a-5 (5) [x01] d..2. 1.0: sched_switch: prev_comm=a prev_pid=5 prev_prio=120 prev_state=R ==> next_comm=b next_pid=6 next_prio=120`, event{}, false},
		{`  a-5 (5) [001] d..2. 1.0: sched_switch: prev_comm=a prev_pid=five prev_prio=120 prev_state=R ==> next_comm=b next_pid=6 next_prio=120`, event{}, false},
		{`: sched_switch: `, event{}, false},
	}
	for _, c := range cases {
		got, ok := parseLine(c.line)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseLine(%q)\n = %+v, %v\nwant %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// traceText builds trace lines: "cpu time prev->next state" shorthands.
type traceText struct{ b strings.Builder }

func (x *traceText) fork(cpu int, sec float64, parent, tgid, child int) {
	fmt.Fprintf(&x.b, "  p-%d (%7d) [%03d] ..... %.6f: sched_process_fork: comm=p pid=%d child_comm=p child_pid=%d\n",
		parent, tgid, cpu, sec, parent, child)
}

func (x *traceText) swtch(cpu int, sec float64, prevComm string, prev, prevTgid int, state, nextComm string, next int) {
	fmt.Fprintf(&x.b, "  %s-%d (%7d) [%03d] d..2. %.6f: sched_switch: prev_comm=%s prev_pid=%d prev_prio=120 prev_state=%s ==> next_comm=%s next_pid=%d next_prio=120\n",
		prevComm, prev, prevTgid, cpu, sec, prevComm, prev, state, nextComm, next)
}

// analyseT analyses the trace built in x.
func analyseT(t *testing.T, x *traceText, root int, minStall int64) *report {
	t.Helper()
	rep, err := analyse(strings.NewReader(x.b.String()), root, minStall)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A process of two threads (600, 601) and a child process (700):
// preempted threads count as a stall only while no thread of the process
// runs, and what ran on the CPUs it waited for is named.
func TestAnalyse(t *testing.T) {
	var x traceText
	x.fork(0, 0.9, 500, 500, 600)                          // the command
	x.swtch(0, 1.0, "swapper/0", 0, 0, "R", "app", 600)    // 600 on cpu0
	x.fork(0, 1.0, 600, 600, 601)                          // a thread
	x.fork(0, 1.0, 600, 600, 700)                          // a child process
	x.swtch(1, 1.0, "swapper/1", 0, 0, "R", "app", 601)    // 601 on cpu1
	x.swtch(0, 1.1, "app", 600, 600, "R", "kdamond.0", 77) // 600 waits, 601 runs: no stall
	x.swtch(1, 1.2, "app", 601, 600, "R", "agent", 70)     // both wait: stall from 1.2
	x.swtch(0, 1.25, "kdamond.0", 77, 77, "I", "app", 600) // ends at 1.25: 50 ms
	x.swtch(1, 1.3, "agent", 70, 1, "S", "app", 601)
	x.swtch(0, 1.4, "app", 600, 600, "S", "swapper/0", 0) // 600 sleeps: no stall
	x.swtch(1, 1.4, "app", 601, 600, "R", "child", 700)   // 601 waits for the child: stall
	x.swtch(1, 1.41, "child", 700, 700, "S", "app", 601)  // 10 ms
	// A switch is missing from the trace: cpu0 ran swapper/0, then (not
	// shown) kworker, which now switches to the app.
	x.swtch(0, 1.5, "kworker/0:1", 9, 9, "I", "app", 600)
	x.swtch(0, 1.6, "app", 600, 600, "R", "kworker/0:1", 9)
	x.swtch(1, 1.6, "app", 601, 600, "R", "x", 8) // stall from 1.6
	x.swtch(0, 1.63, "kworker/0:1", 9, 9, "I", "app", 600)

	rep := analyseT(t, &x, 600, 20e6)
	if rep.events != 16 || rep.first != 0.9e9 || rep.last != 1.63e9 {
		t.Errorf("events %d from %d to %d, want 16 from 0.9 s to 1.63 s", rep.events, rep.first, rep.last)
	}
	want := []stall{
		{tgid: 600, cpus: []int{0, 1}, start: 1.2e9, end: 1.25e9, takers: []taker{{"agent", 50e6}, {"kdamond.0", 50e6}}},
		{tgid: 600, cpus: []int{0, 1}, start: 1.6e9, end: 1.63e9, takers: []taker{{"kworker/0:1", 30e6}, {"x", 30e6}}},
	}
	if !reflect.DeepEqual(rep.stalls, want) {
		t.Errorf("stalls\n %+v\nwant %+v", rep.stalls, want)
	}
	if len(rep.procs) != 2 {
		t.Fatalf("%d processes, want 600 and 700", len(rep.procs))
	}
	p, c := rep.procs[0], rep.procs[1]
	if p.tgid != 600 || p.comm != "app" || p.stalls != 2 || p.stalled != 80e6 || p.preempted != 5 {
		t.Errorf("process %d (%s): %d stalls, %d ns, %d preemptions; want 600 (app): 2, 80 ms, 5", p.tgid, p.comm, p.stalls, p.stalled, p.preempted)
	}
	// on CPU: 600 1.0-1.1, 1.25-1.4, 1.5-1.6; 601 1.0-1.2, 1.3-1.4, 1.41-1.6.
	if want := int64(0.1e9 + 0.15e9 + 0.1e9 + 0.2e9 + 0.1e9 + 0.19e9); p.onCPU != want {
		t.Errorf("process 600 on CPU %d ns, want %d", p.onCPU, want)
	}
	if c.tgid != 700 || c.onCPU != 10e6 || c.stalls != 0 {
		t.Errorf("child %d: on CPU %d, %d stalls; want 700, 10 ms, 0", c.tgid, c.onCPU, c.stalls)
	}

	// Per thread: 601 waited 1.2-1.3 and from 1.6 to the end of the
	// trace (its 10 ms wait is under the threshold), 600 waited 1.1-1.25
	// and 1.6-1.63.
	if len(rep.threads) != 3 {
		t.Fatalf("%d threads, want 601, 600, 700", len(rep.threads))
	}
	t601, t600 := rep.threads[0], rep.threads[1]
	if t601.tid != 601 || t601.tgid != 600 || t601.waits != 2 || t601.waited != 130e6 || !reflect.DeepEqual(t601.takers, map[string]int64{"agent": 100e6, "x": 30e6}) {
		t.Errorf("thread 601: %+v", *t601)
	}
	if t600.tid != 600 || t600.waits != 2 || t600.waited != 180e6 || !reflect.DeepEqual(t600.takers, map[string]int64{"kdamond.0": 150e6, "kworker/0:1": 30e6}) {
		t.Errorf("thread 600: %+v", *t600)
	}

	// A lower threshold also lists the 10 ms stall behind the child.
	rep = analyseT(t, &x, 600, 5e6)
	if len(rep.stalls) != 3 || rep.stalls[2].end-rep.stalls[2].start != 10e6 ||
		!reflect.DeepEqual(rep.stalls[2].takers, []taker{{"child[700]", 10e6}}) {
		t.Errorf("with 5 ms: stalls %+v, want a third of 10 ms taken by child[700]", rep.stalls)
	}
	var out bytes.Buffer
	rep.print(&out, 5e6, 10, true)
	for _, s := range []string{"process 600 (app)", "3 times for 5000 us or more, 90.0 ms in all", "0.3000 s    50.0 ms  600  cpu 0,1: agent 50.0 ms, kdamond.0 50.0 ms",
		"600/601: on CPU 0.490 s, 3 waits, 140.0 ms in all; ran instead: agent 100.0 ms, x 30.0 ms, child[700/700] 10.0 ms"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}

// Switches missing from the trace: a task whose own events never show
// (here "agent") ends where any event shows another task on its CPU;
// with no such event, the stall names both tasks that may have run.
func TestAnalyseMissingSwitch(t *testing.T) {
	var x traceText
	x.swtch(0, 1.0, "swapper/0", 0, 0, "R", "app", 600)
	x.swtch(0, 1.1, "app", 600, 600, "R", "agent", 70)
	// agent -> app is not in the trace, but a timer event in app's
	// context is.
	x.b.WriteString("  app-600 (    600) [000] d.h1. 1.150000: hrtimer_expire_entry: hrtimer=0 function=tick_nohz_handler now=1\n")
	x.swtch(0, 1.2, "app", 600, 600, "R", "rcu", 15)
	// rcu -> x is not in the trace, and nothing shows when.
	x.swtch(0, 1.3, "x", 8, 8, "R", "app", 600)
	rep := analyseT(t, &x, 600, 1)
	want := []stall{
		{tgid: 600, cpus: []int{0}, start: 1.2e9, end: 1.3e9, takers: []taker{{"rcu|x", 100e6}}},
		{tgid: 600, cpus: []int{0}, start: 1.1e9, end: 1.15e9, takers: []taker{{"agent", 50e6}}},
	}
	if !reflect.DeepEqual(rep.stalls, want) {
		t.Errorf("stalls\n %+v\nwant %+v", rep.stalls, want)
	}
	if p := rep.procs[0]; p.onCPU != 0.1e9+0.05e9 {
		t.Errorf("on CPU %d ns, want 150 ms", p.onCPU)
	}
}

// A preempted thread that the trace then shows running, with the switch
// to it lost, is no longer waiting: the stall ends there, at the latest,
// and its sleep is not a stall.
func TestAnalyseLostSwitchIn(t *testing.T) {
	var x traceText
	x.swtch(0, 1.0, "swapper/0", 0, 0, "R", "app", 600)
	x.swtch(0, 1.1, "app", 600, 600, "R", "agent", 70)
	// agent -> app lost; app now goes to sleep.
	x.swtch(0, 1.2, "app", 600, 600, "S", "swapper/0", 0)
	x.swtch(0, 2.2, "swapper/0", 0, 0, "R", "app", 600)
	rep := analyseT(t, &x, 600, 1)
	want := []stall{{tgid: 600, cpus: []int{0}, start: 1.1e9, end: 1.2e9, takers: []taker{{"agent|app", 100e6}}}}
	if !reflect.DeepEqual(rep.stalls, want) {
		t.Errorf("stalls\n %+v\nwant %+v (the app slept from 1.2)", rep.stalls, want)
	}
}

// Idle is pid 0 on every CPU: one CPU going idle does not end another's
// idle time.
func TestAnalyseIdleOnTwoCPUs(t *testing.T) {
	var x traceText
	x.swtch(0, 1.0, "app", 600, 600, "R", "swapper/0", 0) // app waits for cpu 0, which idles
	x.swtch(1, 1.1, "other", 9, 9, "S", "swapper/1", 0)   // cpu 1 idles too
	x.swtch(0, 1.5, "swapper/0", 0, 0, "R", "app", 600)
	rep := analyseT(t, &x, 600, 1)
	if len(rep.stalls) != 1 || !reflect.DeepEqual(rep.stalls[0].takers, []taker{{"swapper/0", 500e6}}) {
		t.Errorf("stalls %+v, want one of 500 ms on an idle cpu 0", rep.stalls)
	}
}

// A task seen running before its fork line (per-CPU clocks that differ)
// is still one of the command's, counted in and out once.
func TestAnalyseForkSeenLate(t *testing.T) {
	var x traceText
	x.swtch(0, 1.0, "swapper/0", 0, 0, "R", "app", 600)
	x.swtch(1, 1.0, "swapper/1", 0, 0, "R", "kid", 700) // before its fork line
	x.fork(0, 1.01, 600, 600, 700)
	x.swtch(1, 1.1, "kid", 700, 700, "R", "agent", 70) // kid waits
	x.swtch(1, 1.2, "agent", 70, 70, "S", "kid", 700)
	rep := analyseT(t, &x, 600, 1)
	want := []stall{{tgid: 700, cpus: []int{1}, start: 1.1e9, end: 1.2e9, takers: []taker{{"agent", 100e6}}}}
	if !reflect.DeepEqual(rep.stalls, want) {
		t.Errorf("stalls\n %+v\nwant %+v", rep.stalls, want)
	}
	for _, p := range rep.procs {
		if p.running < 0 {
			t.Errorf("process %d: %d threads running", p.tgid, p.running)
		}
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add(realSwitch + "\n" + realFork)
	var x traceText
	x.swtch(0, 1.0, "swapper/0", 0, 0, "R", "app", 600)
	x.swtch(0, 1.1, "app", 600, 600, "R", "agent", 70)
	f.Add(x.b.String())
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range strings.Split(s, "\n") {
			if e, ok := parseLine(l); ok && (e.cpu < 0 || e.ns < 0) {
				t.Fatalf("parseLine(%q) = %+v", l, e)
			}
		}
		rep, err := analyse(strings.NewReader(s), 600, 1)
		if err != nil {
			return
		}
		for _, p := range rep.procs {
			if p.running < 0 || p.onCPU < 0 {
				t.Fatalf("process %d: %d threads running, %d ns on CPU", p.tgid, p.running, p.onCPU)
			}
		}
		rep.print(new(bytes.Buffer), 1, 5, true)
	})
}
