package queue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
)

// retainAppend appends writerMsg(writer, 0), (writer, 1), ... a few a
// millisecond, rolling every 100 ms and keeping 2 cycles, until stdin
// closes; then an end marker. It prints "started" after its first append,
// "acked N" after every every-th append (every > 0) and, last, "acked N":
// how many appends returned success, the end marker not counted. An append
// that fails ends it with status 1.
func retainAppend(q *Queue, writer, every int) int {
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
		if every > 0 && (acked+1)%every == 0 {
			fmt.Printf("acked %d\n", acked+1)
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
// while the queue rolls every 100 ms and each keeps 2 to 4 cycles. Two of
// them are stopped (SIGSTOP) for 1 to 2 s (10 to 20 rolls) at a time, long
// enough for retention to delete the cycle they were appending to and the
// one after it, then continued; a third is stopped and killed while
// stopped, a fourth killed while it appends. A tailer in another process,
// following from the start, must read every append that returned success,
// in each writer's order: all of those of the writers that lived, whose
// appends must all succeed, and those of the killed ones up to the last
// they reported (or one more, acknowledged as they died).
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
	// Pauses of 1 to 2 s (10 to 20 rolls); shorter ones, still several
	// rolls, under -short or an emulator.
	pauses, pauseMin, pauseSpread := 3, 1000, 1000
	if testing.Short() || reexec.Emulated() {
		pauses, pauseMin, pauseSpread = 1, 400, 200
	}
	const survivors = 3
	stoppedVictim, runningVictim := survivors, survivors+1
	tail := helperCmd(t, "audit-tail", dir, survivors, 5)
	tailOut, _ := tail.StdoutPipe()
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	type appender struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		acked  chan int // the last count it printed, once its output ends
		victim bool
	}
	var apps []appender
	for w := range survivors + 2 {
		victim := w >= survivors
		every := 0
		if victim {
			every = 1 // it will not get to say at the end
		}
		cmd := helperCmd(t, "retain-append", dir, w, every)
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "started" {
			t.Fatalf("writer %d: %q before its first append", w, sc.Text())
		}
		n := -1
		if victim {
			// Its first append acknowledged before it is stopped or
			// killed: otherwise a slow start leaves it nothing to check.
			if !sc.Scan() {
				t.Fatalf("writer %d: no output after starting", w)
			}
			fmt.Sscanf(sc.Text(), "acked %d", &n)
		}
		acked := make(chan int, 1)
		go func() {
			for sc.Scan() {
				fmt.Sscanf(sc.Text(), "acked %d", &n)
			}
			acked <- n
		}()
		apps = append(apps, appender{cmd, stdin, acked, victim})
	}
	cs, _ := q.Cycles()
	if len(cs) == 0 {
		t.Fatal("no cycle file after the first appends")
	}
	first := cs[0]
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	kill := func(w int) {
		apps[w].cmd.Process.Kill()
		apps[w].cmd.Wait() // reaped: readers then see it dead
	}
	if err := reexec.Pause(apps[stoppedVictim].cmd.Process); err != nil {
		t.Fatal(err)
	}
	for round := range pauses {
		for _, w := range []int{1, 2} {
			time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond) // appending
			p := apps[w].cmd.Process
			if err := reexec.Pause(p); err != nil {
				t.Fatal(err)
			}
			// Several rolls: the others roll on, the tailer reads on and
			// acknowledges, and retention deletes the stopped writer's cycle.
			time.Sleep(time.Duration(pauseMin+rng.IntN(pauseSpread)) * time.Millisecond)
			if err := reexec.Resume(p); err != nil {
				t.Fatal(err)
			}
		}
		if round == 0 {
			kill(stoppedVictim)
			kill(runningVictim)
		}
	}
	time.Sleep(100 * time.Millisecond) // the continued writers append again
	acked := map[int]int{}
	for w, a := range apps {
		if !a.victim {
			a.stdin.Close()
		}
		acked[w] = <-a.acked
		if err := a.cmd.Wait(); !a.victim && err != nil {
			t.Errorf("writer %d: %v after %d appends", w, err, acked[w])
		}
	}
	late := time.AfterFunc(time.Minute, func() { tail.Process.Kill() })
	defer late.Stop()
	read := readCounts(tailOut)
	if err := tail.Wait(); err != nil {
		t.Errorf("audit tailer: %v", err)
	}
	// A killed writer appended at most one message it did not report. Under
	// Wine a killed process's output can end before its threads stop, so
	// that it appends a few more unreported: there only the reported ones
	// are counted on.
	unreported := 1
	if reexec.Emulated() {
		unreported = math.MaxInt32
	}
	for w, a := range apps {
		switch {
		case acked[w] <= 0:
			t.Errorf("writer %d: no append acknowledged", w)
		case !a.victim && read[w] != acked[w]:
			t.Errorf("writer %d: %d appends acknowledged, the tailer read %d", w, acked[w], read[w])
		case a.victim && (read[w] < acked[w] || read[w] > acked[w]+unreported):
			t.Errorf("killed writer %d: %d appends reported acknowledged, the tailer read %d", w, acked[w], read[w])
		}
	}
	if cs, _ := q.Cycles(); len(cs) == 0 || cs[0] <= first {
		t.Fatalf("cycle files at the end: %v; retention deleted none since %d", cs, first)
	}
}
