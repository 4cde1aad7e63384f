package queue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
)

// retainAppend appends writerMsg(writer, 0), (writer, 1), ... a few a
// millisecond, rolling every 100 ms and keeping 2 cycles, until stdin
// closes; then an end marker. It prints "started" after its first append
// and, last, "acked N": how many appends returned success, the end marker
// not counted. An append that fails ends it with status 1.
func retainAppend(q *Queue, writer int) int {
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	buf := make([]byte, 16)
	acked := 0
	for ; !stop.Load(); acked++ {
		if _, err := q.Append(writerMsg(buf, writer, acked)); err != nil {
			fmt.Printf("acked %d\n", acked)
			fmt.Fprintf(os.Stderr, "writer %d, append %d: %v\n", writer, acked, err)
			return 1
		}
		if acked == 0 {
			fmt.Println("started")
		}
		time.Sleep(200 * time.Microsecond)
	}
	if _, err := q.Append(writerMsg(buf, writer, -1)); err != nil {
		fmt.Printf("acked %d\n", acked)
		fmt.Fprintf(os.Stderr, "writer %d, end marker: %v\n", writer, err)
		return 1
	}
	fmt.Printf("acked %d\n", acked)
	return 0
}

// auditTail reads through the named tailer "audit", acknowledging each
// message (so that retention spares what it has not read), until it has
// the end markers of `writers` writers, then prints "W N" per writer: the
// messages it read of each. It exits with 1 on a message out of a
// writer's order or a read error, and with 3 (printing what it read) when
// nothing comes for `idle`.
func auditTail(q *Queue, writers int, idle time.Duration) int {
	tl, err := q.NamedTailer("audit")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var order orderChecker
	order.next = map[int]int{}
	counts := func() {
		for w, n := range order.next {
			fmt.Printf("%d %d\n", w, n)
		}
	}
	for ended := 0; ended < writers; {
		ctx, cancel := context.WithTimeout(context.Background(), idle)
		err := tl.Wait(ctx, Block)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			counts()
			fmt.Fprintf(os.Stderr, "audit: nothing for %v with %d of %d end markers read\n", idle, ended, writers)
			return 3
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "audit:", err)
			return 1
		}
		idx, m, err := tl.Next()
		if err != nil {
			fmt.Fprintln(os.Stderr, "audit:", err)
			return 1
		}
		if _, n, ok := parseWriterMsg(m); ok && n == -1 {
			ended++
			order.last = idx
			continue
		}
		if err := order.add(idx, m); err != nil {
			fmt.Fprintln(os.Stderr, "audit:", err)
			return 1
		}
		if err := tl.Ack(); err != nil {
			fmt.Fprintln(os.Stderr, "audit:", err)
			return 1
		}
	}
	counts()
	return 0
}

// TestPausedAppendersWithRetention: appenders in child processes append
// while the queue rolls every 100 ms and each keeps 2 cycles; two of them
// are stopped (SIGSTOP) for several rolls at a time, long enough for
// retention to delete the cycle they were appending to and the one after
// it, then continued. A tailer in another process, following from the
// start, must read every append that returned success, in each writer's
// order, and every append must succeed.
func TestPausedAppendersWithRetention(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Fast})
	// The audit tailer's name exists before anything is appended, so that
	// retention spares every cycle it has not read.
	audit, err := q.NamedTailer("audit")
	if err != nil {
		t.Fatal(err)
	}
	audit.Close()
	pauses := 3
	if testing.Short() || reexec.Emulated() {
		pauses = 1
	}
	const writers = 3
	tail := helperCmd(t, "audit-tail", dir, writers, 5)
	tailOut, _ := tail.StdoutPipe()
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	type appender struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	var apps []appender
	for w := range writers {
		cmd := helperCmd(t, "retain-append", dir, w)
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		if line, _ := r.ReadString('\n'); line != "started\n" {
			t.Fatalf("writer %d: %q before its first append", w, line)
		}
		apps = append(apps, appender{cmd, stdin, r})
	}
	cs, _ := q.Cycles()
	if len(cs) == 0 {
		t.Fatal("no cycle file after the first appends")
	}
	first := cs[0]
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for range pauses {
		for _, w := range []int{1, 2} {
			time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond) // appending
			p := apps[w].cmd.Process
			p.Signal(syscall.SIGSTOP)
			// Four to six rolls: the others roll on, the tailer reads on and
			// acknowledges, and retention deletes the stopped writer's cycle.
			time.Sleep(time.Duration(400+rng.IntN(200)) * time.Millisecond)
			p.Signal(syscall.SIGCONT)
		}
	}
	time.Sleep(100 * time.Millisecond) // the continued writers append again
	acked := map[int]int{}
	for w, a := range apps {
		a.stdin.Close()
		rest, _ := io.ReadAll(a.out)
		var n int
		if _, err := fmt.Sscanf(string(rest), "acked %d", &n); err != nil {
			t.Errorf("writer %d: output %q", w, rest)
		}
		acked[w] = n
		if err := a.cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v after %d appends", w, err, acked[w])
		}
	}
	late := time.AfterFunc(time.Minute, func() { tail.Process.Kill() })
	defer late.Stop()
	read := map[int]int{}
	sc := bufio.NewScanner(tailOut)
	for sc.Scan() {
		var w, c int
		fmt.Sscan(sc.Text(), &w, &c)
		read[w] = c
	}
	if err := tail.Wait(); err != nil {
		t.Errorf("audit tailer: %v", err)
	}
	for w := range writers {
		if read[w] != acked[w] || acked[w] == 0 {
			t.Errorf("writer %d: %d appends acknowledged, the tailer read %d", w, acked[w], read[w])
		}
	}
	if cs, _ := q.Cycles(); len(cs) == 0 || cs[0] <= first {
		t.Fatalf("cycle files at the end: %v; retention deleted none since %d", cs, first)
	}
}
