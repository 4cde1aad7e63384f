//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// The kernel's text trace (/sys/kernel/tracing/trace with the record-tgid
// option), one event per line:
//
//	queue.test-19692 (  19692) [000] d..2. 25129.648770: sched_switch: prev_comm=queue.test prev_pid=19692 prev_prio=120 prev_state=R ==> next_comm=kdamond.0 next_pid=77 next_prio=120
//	bash-19690       (  19690) [001] ..... 25129.640001: sched_process_fork: comm=bash pid=19690 child_comm=bash child_pid=19692
//
// The header holds the running task's comm-pid, its tgid ("-------" when
// unknown), the CPU, flags and the time in seconds. prev_state is R (or
// R+) when the task was preempted while runnable, anything else when it
// went to sleep or exited.

// event is one parsed line.
type event struct {
	ns        int64 // trace clock, nanoseconds
	cpu       int
	pid, tgid int    // the task in the header; tgid 0 if unknown
	comm      string // its comm
	kind      kind
	// sched_switch
	prevPID, nextPID   int
	prevComm, nextComm string
	preempted          bool // prev_state R: switched out while runnable
	// sched_process_fork
	childPID int
}

type kind uint8

const (
	otherEvent kind = iota // only says which task is on the CPU
	switchEvent
	forkEvent
)

// parseLine parses one line of the trace; ok is false for comments and
// lines it cannot read.
func parseLine(line string) (e event, ok bool) {
	// The header ends at the first ": " after which it parses.
	rest := ""
	for i := 0; ; {
		j := strings.Index(line[i:], ": ")
		if j < 0 {
			return e, false
		}
		i += j
		if parseHeader(line[:i], &e) {
			rest = line[i+2:]
			break
		}
		i += 2
	}
	name, args, _ := strings.Cut(rest, ": ")
	switch name {
	case "sched_switch":
		e.kind = switchEvent
		// Comms may hold spaces: cut at the next field's name, not at
		// blanks.
		e.prevComm = field(args, "prev_comm=", " prev_pid=")
		e.nextComm = field(args, "next_comm=", " next_pid=")
		state := field(args, "prev_state=", " ==> ")
		e.preempted = state == "R" || state == "R+"
		var err1, err2 error
		e.prevPID, err1 = strconv.Atoi(field(" "+args, " prev_pid=", " prev_prio="))
		e.nextPID, err2 = strconv.Atoi(field(" "+args, " next_pid=", " next_prio="))
		return e, err1 == nil && err2 == nil
	case "sched_process_fork":
		e.kind = forkEvent
		var err error
		e.childPID, err = strconv.Atoi(field(args, "child_pid=", ""))
		return e, err == nil
	}
	return e, true
}

// parseHeader reads "comm-pid (tgid) [cpu] flags seconds.micros" from the
// right, since the comm may hold anything.
func parseHeader(h string, e *event) bool {
	f := strings.Fields(h)
	if len(f) < 4 {
		return false
	}
	sec, frac, ok := strings.Cut(f[len(f)-1], ".")
	if !ok || len(frac) == 0 || len(frac) > 9 {
		return false
	}
	s, err1 := strconv.ParseInt(sec, 10, 64)
	fr, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil || s < 0 || s > 1<<32 || fr < 0 {
		return false
	}
	for i := len(frac); i < 9; i++ {
		fr *= 10
	}
	e.ns = s*1e9 + fr
	cpu := f[len(f)-3]
	if len(cpu) < 3 || cpu[0] != '[' || cpu[len(cpu)-1] != ']' {
		return false
	}
	var err error
	if e.cpu, err = strconv.Atoi(cpu[1 : len(cpu)-1]); err != nil || e.cpu < 0 || e.cpu > 1<<16 {
		return false
	}
	// The tgid: "(  19692)" may be split by the padding into "(" "19692)".
	head := strings.TrimSpace(h[:strings.LastIndex(h, cpu)])
	task := head
	if open := strings.LastIndex(head, "("); open >= 0 && strings.HasSuffix(head, ")") {
		if t, err := strconv.Atoi(strings.TrimSpace(head[open+1 : len(head)-1])); err == nil {
			e.tgid = t
		}
		task = strings.TrimSpace(head[:open])
	}
	dash := strings.LastIndex(task, "-")
	if dash < 0 {
		return false
	}
	e.comm = task[:dash]
	e.pid, err = strconv.Atoi(task[dash+1:])
	return err == nil
}

// field returns the text after name up to end (or the next blank when end
// is empty).
func field(s, name, end string) string {
	i := strings.Index(s, name)
	if i < 0 {
		return ""
	}
	s = s[i+len(name):]
	if end == "" {
		end = " "
	}
	if j := strings.Index(s, end); j >= 0 {
		s = s[:j]
	}
	return s
}

// stall is a time one of the traced processes made no progress although
// it wanted to: none of its threads ran while at least one was runnable
// (preempted, waiting for a CPU). Counting per process rather than per
// thread matters for Go, whose goroutines move between threads: a thread
// preempted by its own process's thread has often just handed its
// goroutine over.
type stall struct {
	tgid       int
	cpus       []int // where its runnable threads waited
	start, end int64
	takers     []taker // what ran on those CPUs meanwhile, longest first
}

type taker struct {
	name string // comm, or comm[tgid] for one of the traced processes
	ns   int64
}

// process sums one traced process's threads.
type process struct {
	tgid      int
	comm      string
	onCPU     int64
	preempted int   // switch-outs of its threads while runnable
	stalls    int   // stalls at least the threshold long
	stalled   int64 // their total
	takers    map[string]int64

	running    int          // threads on a CPU now
	waiting    map[int]int  // preempted threads: tid -> CPU
	stallStart int64        // when running fell to 0 with threads waiting; -1 if not
	stallCPUs  map[int]bool // CPUs waited on during the open stall
}

// thread is one traced thread: how long it ran, and how long it waited,
// runnable, for a CPU (waits at least the threshold long). For a thread
// that one goroutine keeps (runtime.LockOSThread, like a pinned event
// loop) a wait is a stall of that goroutine.
type thread struct {
	tid, tgid int
	onCPU     int64
	waits     int
	waited    int64
	takers    map[string]int64

	waitFrom int64 // when it was preempted; -1 when not waiting
	waitCPU  int
}

// wait is one such wait, before its takers are known.
type wait struct {
	th         *thread
	cpu        int
	start, end int64
}

// report is what a trace shows about the traced processes.
type report struct {
	first, last int64 // trace clock of the first and last event
	events      int
	procs       []*process // by tgid
	stalls      []stall    // at least the threshold long, longest first
	threads     []*thread  // most time on a CPU first
}

type segment struct {
	start, end int64
	pid        int
	comm       string
}

// analyse reads a trace and follows root and every task it forks. A stall
// shorter than minStall is not counted.
func analyse(r io.Reader, root int, minStall int64) (*report, error) {
	ours := map[int]bool{root: true}
	tgid := map[int]int{}
	comm := map[int]string{}
	type running struct {
		pid   int
		comm  string
		since int64
	}
	current := map[int]running{}    // per CPU
	segments := map[int][]segment{} // per CPU, what ran
	procs := map[int]*process{}
	group := func(pid int) int {
		if g := tgid[pid]; g != 0 {
			return g
		}
		return pid
	}
	proc := func(pid int) *process {
		g := group(pid)
		p := procs[g]
		if p == nil {
			p = &process{tgid: g, takers: map[string]int64{}, waiting: map[int]int{}, stallStart: -1, stallCPUs: map[int]bool{}}
			procs[g] = p
		}
		return p
	}
	threads := map[int]*thread{}
	thr := func(tid int) *thread {
		th := threads[tid]
		if th == nil {
			th = &thread{tid: tid, waitFrom: -1, takers: map[string]int64{}}
			threads[tid] = th
		}
		return th
	}
	var waits []wait
	rep := &report{}
	var found []stall
	// settle opens or closes p's stall after a change at time t.
	settle := func(p *process, t int64) {
		stalled := p.running == 0 && len(p.waiting) > 0
		switch {
		case stalled && p.stallStart < 0:
			p.stallStart = t
		case !stalled && p.stallStart >= 0:
			if t-p.stallStart >= minStall {
				st := stall{tgid: p.tgid, start: p.stallStart, end: t}
				for c := range p.stallCPUs {
					st.cpus = append(st.cpus, c)
				}
				sort.Ints(st.cpus)
				found = append(found, st)
			}
			p.stallStart = -1
			clear(p.stallCPUs)
		}
		if stalled {
			for _, c := range p.waiting {
				p.stallCPUs[c] = true
			}
		}
	}
	// Two passes: a thread's process is known from the first line it
	// heads, which may come after it first runs.
	var events []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		e, ok := parseLine(sc.Text())
		if !ok {
			continue
		}
		if e.tgid != 0 {
			tgid[e.pid] = e.tgid
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// The traced tasks: root, what it forks, and every thread of those
	// processes, even one whose fork the trace lost.
	for _, e := range events {
		if e.kind == forkEvent && ours[e.pid] {
			ours[e.childPID] = true
		}
	}
	for pid, g := range tgid {
		if ours[g] {
			ours[pid] = true
		}
	}
	where := map[int]int{}    // pid -> the CPU it runs on (not for idle, pid 0 on every CPU)
	counted := map[int]bool{} // traced tasks counted as running
	// forget ends what the trace said of a traced thread's waiting: it
	// ran since, unseen.
	forget := func(pid int, t int64) {
		p := proc(pid)
		delete(p.waiting, pid)
		settle(p, t)
		thr(pid).waitFrom = -1
	}
	// leave closes what runs on cpu at t; label names it in the segment.
	leave := func(cpu int, t int64, label string) {
		c, ok := current[cpu]
		if !ok {
			return
		}
		delete(current, cpu)
		if c.pid != 0 {
			delete(where, c.pid)
		}
		segments[cpu] = append(segments[cpu], segment{c.since, t, c.pid, label})
		if counted[c.pid] {
			delete(counted, c.pid)
			p := proc(c.pid)
			ran := max(t-c.since, 0) // 0 if the clock went back
			p.onCPU += ran
			thr(c.pid).onCPU += ran
			p.running--
			settle(p, t)
		}
	}
	// enter makes pid the task on cpu from t.
	enter := func(cpu int, t int64, pid int, name string) {
		if other, ok := where[pid]; ok && other != cpu {
			leave(other, t, current[other].comm) // its switch out was lost
		}
		current[cpu] = running{pid, name, t}
		if pid != 0 {
			where[pid] = cpu
		}
		if ours[pid] && !counted[pid] {
			counted[pid] = true
			p := proc(pid)
			p.running++
			delete(p.waiting, pid)
			settle(p, t)
			if th := thr(pid); th.waitFrom >= 0 {
				if t-th.waitFrom >= minStall {
					waits = append(waits, wait{th, th.waitCPU, th.waitFrom, t})
				}
				th.waitFrom = -1
			}
		}
	}
	for _, e := range events {
		if rep.events == 0 {
			rep.first = e.ns
		}
		rep.events++
		rep.last = e.ns
		if e.comm == "<idle>" {
			e.comm = fmt.Sprintf("swapper/%d", e.cpu)
		}
		switch e.kind {
		case otherEvent:
			// The task in the header is on the CPU: if the trace said
			// another was, the switch between them is not in the trace
			// (tasks whose own events it never shows).
			if c, ok := current[e.cpu]; !ok || c.pid != e.pid {
				comm[e.pid] = e.comm
				leave(e.cpu, e.ns, c.comm)
				enter(e.cpu, e.ns, e.pid, e.comm)
			}
		case switchEvent:
			comm[e.prevPID], comm[e.nextPID] = e.prevComm, e.nextComm
			c, ok := current[e.cpu]
			switch {
			case ok && c.pid != e.prevPID:
				// The switch to prev is missing, with no event in
				// between to show when: both ran, in some split.
				leave(e.cpu, e.ns, c.comm+"|"+e.prevComm)
				if ours[e.prevPID] {
					forget(e.prevPID, e.ns)
				}
			default:
				leave(e.cpu, e.ns, e.prevComm)
			}
			if ours[e.prevPID] && e.preempted {
				p := proc(e.prevPID)
				p.waiting[e.prevPID] = e.cpu
				p.preempted++
				settle(p, e.ns)
				th := thr(e.prevPID)
				th.waitFrom, th.waitCPU = e.ns, e.cpu
			}
			enter(e.cpu, e.ns, e.nextPID, e.nextComm)
		}
	}
	// The trace ends: what runs now ran until its end, and a stall still
	// open ends there.
	for cpu, c := range current {
		leave(cpu, rep.last, c.comm)
	}
	for _, p := range procs {
		clear(p.waiting)
		settle(p, rep.last)
	}
	for _, th := range threads {
		if th.waitFrom >= 0 && rep.last-th.waitFrom >= minStall {
			waits = append(waits, wait{th, th.waitCPU, th.waitFrom, rep.last})
		}
		th.waitFrom = -1
	}
	// ranOn adds up what ran on cpu in [start, end), the traced
	// processes' threads named by process, or by thread too.
	ranOn := func(by map[string]int64, cpu int, start, end int64, byThread bool) {
		segs := segments[cpu]
		j := sort.Search(len(segs), func(j int) bool { return segs[j].end > start })
		for ; j < len(segs) && segs[j].start < end; j++ {
			g := segs[j]
			name := g.comm
			switch {
			case ours[g.pid] && byThread:
				name = fmt.Sprintf("%s[%d/%d]", g.comm, group(g.pid), g.pid)
			case ours[g.pid]:
				name = fmt.Sprintf("%s[%d]", g.comm, group(g.pid))
			}
			by[name] += min(g.end, end) - max(g.start, start)
		}
	}
	for _, w := range waits {
		th := w.th
		th.waits++
		th.waited += w.end - w.start
		ranOn(th.takers, w.cpu, w.start, w.end, true)
	}
	for _, th := range threads {
		th.tgid = group(th.tid)
		rep.threads = append(rep.threads, th)
	}
	sort.Slice(rep.threads, func(i, j int) bool {
		a, b := rep.threads[i], rep.threads[j]
		if a.onCPU != b.onCPU {
			return a.onCPU > b.onCPU
		}
		return a.tid < b.tid
	})
	// What ran on the waited-for CPUs during each stall.
	for i := range found {
		s := &found[i]
		by := map[string]int64{}
		for _, cpu := range s.cpus {
			ranOn(by, cpu, s.start, s.end, false)
		}
		s.takers = sortTakers(by)
		p := procs[s.tgid]
		p.stalls++
		p.stalled += s.end - s.start
		for _, t := range s.takers {
			p.takers[t.name] += t.ns
		}
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if la, lb := a.end-a.start, b.end-b.start; la != lb {
			return la > lb
		}
		if a.start != b.start {
			return a.start < b.start
		}
		return a.tgid < b.tgid
	})
	rep.stalls = found
	for _, p := range procs {
		p.comm = comm[p.tgid] // as last seen: after any exec
		rep.procs = append(rep.procs, p)
	}
	sort.Slice(rep.procs, func(i, j int) bool { return rep.procs[i].tgid < rep.procs[j].tgid })
	return rep, nil
}

func sortTakers(by map[string]int64) []taker {
	ts := make([]taker, 0, len(by))
	for n, ns := range by {
		ts = append(ts, taker{n, ns})
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].ns != ts[j].ns {
			return ts[i].ns > ts[j].ns
		}
		return ts[i].name < ts[j].name
	})
	return ts
}

// print writes the report: per process, then the longest stalls.
func (r *report) print(w io.Writer, min int64, top int, threads bool) {
	fmt.Fprintf(w, "trace: %.3f s, %d events\n", float64(r.last-r.first)/1e9, r.events)
	for _, p := range r.procs {
		if p.onCPU == 0 && p.preempted == 0 {
			continue
		}
		fmt.Fprintf(w, "process %d (%s): on CPU %.3f s; threads preempted %d times; stalled (no thread running, one waiting for a CPU) %d times for %s or more, %s in all\n",
			p.tgid, p.comm, float64(p.onCPU)/1e9, p.preempted, p.stalls, us(min), us(p.stalled))
		if ts := sortTakers(p.takers); len(ts) > 0 {
			fmt.Fprintf(w, "  ran instead: %s\n", takerList(ts, 6))
		}
	}
	if threads {
		fmt.Fprintf(w, "threads, most time on a CPU first (waits: runnable but off its CPU for %s or more):\n", us(min))
		for i, th := range r.threads {
			if i == top {
				break
			}
			fmt.Fprintf(w, "  %d/%d: on CPU %.3f s, %d waits, %s in all", th.tgid, th.tid, float64(th.onCPU)/1e9, th.waits, us(th.waited))
			if ts := sortTakers(th.takers); len(ts) > 0 {
				fmt.Fprintf(w, "; ran instead: %s", takerList(ts, 4))
			}
			fmt.Fprintln(w)
		}
	}
	if len(r.stalls) == 0 {
		return
	}
	fmt.Fprintf(w, "longest stalls (time from the trace's start, length, process, CPUs waited for: what ran there):\n")
	for i, s := range r.stalls {
		if i == top {
			break
		}
		fmt.Fprintf(w, "  %8.4f s  %9s  %d  cpu %s: %s\n", float64(s.start-r.first)/1e9, us(s.end-s.start), s.tgid, intList(s.cpus), takerList(s.takers, 3))
	}
}

func takerList(ts []taker, n int) string {
	var b strings.Builder
	for i, t := range ts {
		if i == n {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", t.name, us(t.ns))
	}
	return b.String()
}

// us formats nanoseconds as microseconds or milliseconds.
func us(ns int64) string {
	if ns >= 10e6 {
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%d us", (ns+500)/1000)
}

func intList(v []int) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}
