package eda

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ChildArg is the first argument of a child process of a run; a program
// that runs process placements calls ChildMain when it sees it.
const ChildArg = "__eda_child"

// childSpec tells a child what to serve; it comes as its second argument.
type childSpec struct {
	Role    role          `json:"role"`
	Plan    plan          `json:"plan"`
	Seed    uint32        `json:"seed"`
	Dir     string        `json:"dir"`
	Wait    WaitMode      `json:"wait"`
	Workers int           `json:"workers"`
	Batch   time.Duration `json:"batch"`
	Pin     bool          `json:"pin_loops"`
	PinFrom int           `json:"pin_from"` // loop i goes to CPU PinFrom+i
	Probes  bool          `json:"service_probes"`
}

// childReport is a child's last line on stdout.
type childReport struct {
	Hists    [][probes]string `json:"hists"`
	Handled  []handled        `json:"handled"`
	Received int64            `json:"received"`
	Expected int64            `json:"expected"`
	Bad      int64            `json:"bad"`
	Err      string           `json:"err,omitempty"`
}

type handled struct {
	Instance int   `json:"i"`
	Service  int   `json:"s"`
	N        int64 `json:"n"`
}

// The protocol on a child's stdin and stdout, one line each:
//
//	child:  ready             (topics and counters open)
//	parent: start <ns>        (the plan's first send, on the shared clock)
//	parent: stop
//	child:  {report JSON}
//
// A child whose stdin closes early exits: its parent is gone.

// ChildMain runs a child process of a run and returns its exit code.
func ChildMain(args []string) int {
	if err := child(args); err != nil {
		fmt.Fprintln(os.Stderr, "eda child:", err)
		return 1
	}
	return 0
}

func child(args []string) error {
	if len(args) != 2 || args[0] != ChildArg {
		return fmt.Errorf("usage: %s SPEC", ChildArg)
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(args[1]), &spec); err != nil {
		return err
	}
	counters, err := openCounters(spec.Dir, spec.Plan.Instances)
	if err != nil {
		return err
	}
	defer counters.Close()
	tr := &Queues{Dir: spec.Dir}
	defer tr.Close()
	c := &chain{counters: counters, serviceProbes: spec.Probes}
	srv, err := open(c, tr, spec.Seed, spec.Role)
	if err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	line, err := in.ReadString('\n')
	start, perr := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(line), "start "), 10, 64)
	if err != nil || perr != nil {
		return fmt.Errorf("no start from the parent (%q)", line)
	}
	c.plan = spec.Plan
	c.plan.Start = start
	c.rec = newRecorder(c.plan, max(spec.Workers, 1))
	cfg := Config{Wait: spec.Wait, Workers: spec.Workers, Batch: spec.Batch, PinLoops: spec.Pin, pinFrom: spec.PinFrom}
	if err := srv.start(cfg); err != nil {
		return err
	}
	if line, err := in.ReadString('\n'); err != nil || strings.TrimSpace(line) != "stop" {
		srv.halt()
		return fmt.Errorf("parent gone (%q, %v)", line, err)
	}
	rep := childReport{Bad: c.bad.Load()}
	if err := srv.halt(); err != nil {
		rep.Err = err.Error()
	}
	if rep.Hists, err = encodeHists(c.rec.merged()); err != nil {
		return err
	}
	for _, in := range c.instances {
		for _, s := range spec.Role.Services {
			rep.Handled = append(rep.Handled, handled{in.id, s, in.handled[s-1]})
		}
		if spec.Role.Receivers {
			rep.Received += in.received.Load()
			rep.Expected += c.plan.sends(in.id)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// children are the child processes of a run, seen from the parent.
type children struct {
	procs  []*childProc
	onDead func() // called when a child exits unasked
}

type childProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stdout *os.File
	done   chan struct{} // closed when the process has exited
	err    error         // its exit status, once done
	asked  atomic.Bool   // we asked it to stop
}

// startChildren starts a child per role and waits until all are ready.
func startChildren(ctx context.Context, cfg Config, dir string, seed uint32, p plan, roles []role, onDead func()) (*children, error) {
	cs := &children{onDead: onDead}
	if len(roles) == 0 {
		return cs, nil
	}
	exe := cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	pinFrom := 0 // the children's loops take the CPUs in turn
	for _, r := range roles {
		workers := cfg.Workers
		env := os.Environ()
		if len(r.Instances) == 1 || cfg.Placement == ProcessPerCPU {
			workers = 1 // a process per instance or per CPU: one loop, one P
			env = append(env, "GOMAXPROCS=1")
		}
		// A process bound to its CPU as a whole needs no locked threads.
		bindProcess := cfg.PinLoops && cfg.Placement == ProcessPerCPU
		spec, _ := json.Marshal(childSpec{Role: r, Plan: p, Seed: seed, Dir: dir, Wait: cfg.Wait, Workers: workers, Batch: cfg.Batch, Pin: cfg.PinLoops && !bindProcess, PinFrom: pinFrom, Probes: !cfg.NoServiceProbes})
		cpu := pinFrom // this child's first CPU
		pinFrom += workers
		cmd := exec.Command(exe, ChildArg, string(spec))
		cmd.Env = env
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = childAttr()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			cs.kill()
			return nil, err
		}
		// A pipe of our own for stdout: Wait closes a StdoutPipe when the
		// child exits, possibly before its last line is read.
		pr, pw, err := os.Pipe()
		if err != nil {
			cs.kill()
			return nil, err
		}
		cmd.Stdout = pw
		if bindProcess {
			err = startOn(cmd, cpu) // the whole process on its CPU
		} else {
			err = cmd.Start()
		}
		pw.Close()
		if err != nil {
			pr.Close()
			cs.kill()
			return nil, fmt.Errorf("eda: start child: %w", err)
		}
		cp := &childProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(pr), stdout: pr, done: make(chan struct{})}
		go func() {
			cp.err = cmd.Wait()
			close(cp.done)
			if !cp.asked.Load() && cs.onDead != nil {
				cs.onDead()
			}
		}()
		cs.procs = append(cs.procs, cp)
	}
	// Wait for every child to be ready, reading each one's first line.
	var wg sync.WaitGroup
	errs := make([]error, len(cs.procs))
	for i, cp := range cs.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, err := cp.out.ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "ready" {
				errs[i] = cs.exited(i, fmt.Errorf("did not get ready: %q %v", line, err))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			cs.kill()
			return nil, err
		}
	}
	// A child that died after its ready line has cancelled ctx: name it,
	// rather than the cancellation it caused.
	err := cs.failed()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		cs.kill()
		return nil, err
	}
	return cs, nil
}

func (cs *children) pids() []int {
	pids := make([]int, len(cs.procs))
	for i, cp := range cs.procs {
		pids[i] = cp.cmd.Process.Pid
	}
	return pids
}

// start tells every child when the plan starts.
func (cs *children) start(t int64) error {
	if err := cs.failed(); err != nil {
		return err
	}
	for i, cp := range cs.procs {
		if _, err := fmt.Fprintf(cp.stdin, "start %d\n", t); err != nil {
			return cs.exited(i, err)
		}
	}
	return nil
}

// exited describes child i, which stopped answering: how it ended, once
// it has.
func (cs *children) exited(i int, err error) error {
	cp := cs.procs[i]
	select {
	case <-cp.done:
		return fmt.Errorf("%w: child %d (pid %d) exited during the run: %v", errChild, i, cp.cmd.Process.Pid, cp.err)
	case <-time.After(time.Second):
		return fmt.Errorf("%w: child %d (pid %d): %v", errChild, i, cp.cmd.Process.Pid, err)
	}
}

// failed reports a child that exited before it was asked to stop.
func (cs *children) failed() error {
	for i, cp := range cs.procs {
		select {
		case <-cp.done:
			if !cp.asked.Load() {
				return fmt.Errorf("%w: child %d (pid %d) exited during the run: %v", errChild, i, cp.cmd.Process.Pid, cp.err)
			}
		default:
		}
	}
	return nil
}

// stop asks every child to stop and collects their reports.
func (cs *children) stop() ([]childReport, error) {
	for _, cp := range cs.procs {
		cp.asked.Store(true)
		fmt.Fprintln(cp.stdin, "stop")
	}
	reports := make([]childReport, len(cs.procs))
	var first error
	for i, cp := range cs.procs {
		line, err := cp.out.ReadString('\n')
		if err == nil {
			err = json.Unmarshal([]byte(line), &reports[i])
		} else {
			err = fmt.Errorf("no report: %v", err)
		}
		if err == nil && reports[i].Err != "" {
			err = fmt.Errorf("%s", reports[i].Err)
		}
		<-cp.done
		if err == nil && cp.err != nil {
			err = cp.err
		}
		if err != nil && first == nil {
			first = fmt.Errorf("%w: child %d (pid %d): %v", errChild, i, cp.cmd.Process.Pid, err)
		}
	}
	return reports, first
}

// kill ends every child still running; no child outlives the run.
func (cs *children) kill() {
	for _, cp := range cs.procs {
		select {
		case <-cp.done:
			continue
		default:
		}
		cp.asked.Store(true)
		cp.cmd.Process.Kill()
		cp.stdin.Close()
		<-cp.done
	}
	for _, cp := range cs.procs {
		cp.stdout.Close()
	}
}
