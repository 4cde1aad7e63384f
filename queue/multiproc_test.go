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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
)

// Multi-process tests re-run the test binary as helper processes chosen
// by OFFQUEUE_HELPER.

func init() {
	// Under qemu-user every reserved page costs the emulator memory, and
	// each cycle reserves MaxCycleSize (.ci/run sets this).
	if v, err := strconv.ParseInt(os.Getenv("OFFMAP_TEST_MAX_CYCLE_SIZE"), 10, 64); err == nil && v > 0 {
		defaultMaxCycleSize = v
	}
}

func TestMain(m *testing.M) {
	if role := os.Getenv("OFFQUEUE_HELPER"); role != "" {
		os.Exit(runHelper(role, os.Getenv("OFFQUEUE_DIR"), os.Getenv("OFFQUEUE_ARGS")))
	}
	os.Exit(m.Run())
}

func helperCmd(t testing.TB, role, dir string, args ...any) *exec.Cmd {
	cmd := reexec.CommandContext(t.Context(), "-test.run=^$")
	cmd.Env = append(os.Environ(), "OFFQUEUE_HELPER="+role, "OFFQUEUE_DIR="+dir,
		"OFFQUEUE_ARGS="+strings.TrimSpace(fmt.Sprintln(args...)))
	cmd.Stderr = os.Stderr
	return cmd
}

// waitForFile reports whether path exists within d, polling: the
// helpers' way to wait for a step of the test that started them.
func waitForFile(path string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

func runHelper(role, dir, args string) int {
	var a []int
	for _, f := range strings.Fields(args) {
		n, _ := strconv.Atoi(f)
		a = append(a, n)
	}
	if role == "floor-reader" { // messages, warm-up: no queue (latency_bench_test.go)
		return floorReader(dir, a[0], a[1], len(a) > 2 && a[2] != 0)
	}
	opts := Options{Roll: Fast, SkipAfter: 5 * time.Millisecond}
	if role == "latency-reader" || role == "watch-cycles" {
		opts = Options{} // no roll in the middle of a latency measurement; the queue's own roll
	}
	if role == "retain-append" {
		opts.KeepCycles = 2 + a[0]%3 // writers keep 2, 3 or 4 cycles
	}
	q, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer q.Close()
	switch role {
	case "watch-cycles": // prints "created N" and "deleted N" until stdin closes
		ctx, cancel := context.WithCancel(context.Background())
		go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
		fmt.Println("watching")
		err := q.WatchCycles(ctx, 5*time.Millisecond, func(e CycleEvent) {
			fmt.Println(map[CycleEventKind]string{CycleCreated: "created", CycleDeleted: "deleted"}[e.Kind], e.Cycle)
		})
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "append": // writer id, count[, 1: no end marker; 2: halfway, wait for $OFFQUEUE_GATE to exist]: then an end marker (count = -1)
		buf := make([]byte, 16)
		victim := len(a) > 2 && a[2] == 1
		gated := len(a) > 2 && a[2] == 2
		if victim {
			fmt.Println("started") // the test may kill it from now on
		}
		for i := 0; i < a[1]; i++ {
			if _, err := q.Append(writerMsg(buf, a[0], i)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if victim && i == 0 {
				fmt.Println("appending")
			}
			if gated && i == a[1]/2 && !waitForFile(os.Getenv("OFFQUEUE_GATE"), 2*time.Minute) {
				fmt.Fprintln(os.Stderr, "no gate")
				return 1
			}
		}
		if len(a) < 3 || a[2] != 1 {
			q.Append(writerMsg(buf, a[0], -1))
		}
	case "retain-append": // writer id, every: append until stdin closes (see retainAppend)
		return retainAppend(q, a[0], a[1])
	case "audit-tail": // writers, idle seconds: see auditTail
		return auditTail(q, a[0], time.Duration(a[1])*time.Second)
	case "typed-append": // count: trades 0 .. count-1
		ta, err := NewAppender[trade](q)
		if err != nil {
			return 1
		}
		for i := range a[0] {
			v := tradeOf(i)
			if _, err := ta.Append(&v); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	case "tail": // writers to wait for (end markers), wait mode
		return helperTail(q, a[0], WaitMode(a[1]))
	case "backup-and-hang": // cycles: back up to $OFFQUEUE_DEST, at that hook call print "tmp PATH" and wait for stdin to close; then "done"
		backupHook = func(tmp string, cycles int) {
			if cycles == a[0] {
				fmt.Println("tmp", tmp)
				io.Copy(io.Discard, os.Stdin)
			}
		}
		if _, err := q.Backup(os.Getenv("OFFQUEUE_DEST")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("done")
		return 0
	case "reserve-and-hang": // claim a slot, say so, never commit
		w, err := q.Reserve(16)
		if err != nil {
			return 1
		}
		fmt.Println("reserved", w.Index())
		select {}
	case "skipped-count": // print Stats().SkippedSlots
		st, err := q.Stats()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(st.SkippedSlots)
	case "latency-reader": // wait mode, messages, warm-up: record and print latency
		return latencyReader(q, WaitMode(a[0]), a[1], a[2], len(a) > 3 && a[3] != 0)
	case "wait-once-stats": // print Stats.Wakeups, then as wait-once
		st, err := q.Stats()
		if err != nil {
			return 1
		}
		fmt.Printf("wakeups %s\n", st.Wakeups)
		fallthrough
	case "wait-once": // [doorbell and file recheck, seconds[, wait mode]]: block until one message, print it
		mode := Block
		if len(a) > 0 {
			bellRecheck = time.Duration(a[0]) * time.Second
			fileRecheck = bellRecheck
		}
		if len(a) > 1 {
			mode = WaitMode(a[1])
		}
		tl, _ := q.Tailer()
		tl.SeekEnd()
		fmt.Println("waiting")
		if err := tl.Wait(context.Background(), mode); err != nil {
			return 1
		}
		_, m, _ := tl.Next()
		fmt.Printf("got %s\n", m)
	}
	return 0
}

// helperTail reads until it has seen the end markers of `ends` writers and
// prints, per writer, how many messages it saw; it exits non-zero on a
// duplicate, a gap or a reordering.
func helperTail(q *Queue, ends int, mode WaitMode) int {
	tl, _ := q.Tailer()
	next := map[int]int{}
	ended := 0
	var last uint64
	for ended < ends {
		if err := tl.Wait(context.Background(), mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		idx, m, err := tl.Next()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if last != 0 && idx <= last {
			fmt.Fprintf(os.Stderr, "index %#x after %#x\n", idx, last)
			return 1
		}
		last = idx
		w, n, ok := parseWriterMsg(m)
		switch {
		case !ok:
			fmt.Fprintf(os.Stderr, "bad message %x at %#x\n", m, idx)
			return 1
		case n == -1:
			ended++
		case n != next[w]:
			fmt.Fprintf(os.Stderr, "writer %d: message %d where %d was due\n", w, n, next[w])
			return 1
		default:
			next[w] = n + 1
		}
	}
	for w, n := range next {
		fmt.Printf("%d %d\n", w, n)
	}
	return 0
}

// tailCounts runs a tail helper and returns its per-writer counts.
func startTail(t *testing.T, dir string, ends int, mode WaitMode) func() map[int]int {
	cmd := helperCmd(t, "tail", dir, ends, int(mode))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() map[int]int {
		// Called once the appenders are done: a tailer still asleep two
		// minutes later missed a wake-up.
		late := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
		defer func() {
			if !late.Stop() {
				t.Fatalf("a tailer (mode %d) was still waiting two minutes after the appenders ended", mode)
			}
		}()
		counts := readCounts(out)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("tailer: %v", err)
		}
		return counts
	}
}

func perProcess() int {
	if reexec.Emulated() {
		return 3000 // CI's qemu-aarch64 run, some twenty times slower
	}
	if testing.Short() {
		return 30000
	}
	return 300000
}

func TestMultiProcess(t *testing.T) {
	dir := t.TempDir()
	per := perProcess()
	q := openT(t, dir, Options{Roll: Fast}) // create it before the helpers start
	_ = q
	tails := []func() map[int]int{startTail(t, dir, 3, Block), startTail(t, dir, 3, Yield), startTail(t, dir, 3, BlockThread)}
	var cmds []*exec.Cmd
	for w := 0; w < 3; w++ {
		cmd := helperCmd(t, "append", dir, w, per)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("appender: %v", err)
		}
	}
	for i, wait := range tails {
		counts := wait()
		for w := 0; w < 3; w++ {
			if counts[w] != per {
				t.Fatalf("tailer %d saw %d messages of writer %d, want %d", i, counts[w], w, per)
			}
		}
	}
}

// TestMultiProcessKill kills one appender with SIGKILL at random instants
// (several times, restarting it under a new writer id) while two others
// append and two tailers read. Each killed writer's messages must arrive
// as an unbroken prefix, the same for both tailers, including every
// message the test saw committed before the kill.
func TestMultiProcessKill(t *testing.T) {
	dir := t.TempDir()
	per := perProcess()
	q := openT(t, dir, Options{Roll: Fast})
	const kills = 4
	tails := []func() map[int]int{startTail(t, dir, 3, Block), startTail(t, dir, 3, Spin)}
	var survivors []*exec.Cmd
	for w := 0; w < 2; w++ {
		cmd := helperCmd(t, "append", dir, w, per)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		survivors = append(survivors, cmd)
	}
	// Watch the queue to kill each victim after a random number of its
	// messages has been committed.
	watch := tailerT(t, q)
	seen := map[int]int{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for k := 0; k < kills; k++ {
		victim := 10 + k
		cmd := helperCmd(t, "append", dir, victim, per, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		at := 1 + rng.IntN(per/(kills+1))
		for seen[victim] < at {
			if err := watch.Wait(context.Background(), Yield); err != nil {
				t.Fatal(err)
			}
			_, m, _ := watch.Next()
			if w, n, ok := parseWriterMsg(m); ok && n != -1 {
				seen[w] = max(seen[w], n+1)
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	last := helperCmd(t, "append", dir, 99, per)
	if err := last.Start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range append(survivors, last) {
		if err := c.Wait(); err != nil {
			t.Fatalf("appender: %v", err)
		}
	}
	var results []map[int]int
	var mu sync.Mutex
	for _, wait := range tails {
		c := wait()
		mu.Lock()
		results = append(results, c)
		mu.Unlock()
	}
	for i, counts := range results {
		for _, w := range []int{0, 1, 99} {
			if counts[w] != per {
				t.Fatalf("tailer %d saw %d messages of writer %d, want %d", i, counts[w], w, per)
			}
		}
		for k := 0; k < kills; k++ {
			v := 10 + k
			if counts[v] < seen[v] || counts[v] != results[0][v] {
				t.Fatalf("killed writer %d: tailer %d saw %d messages, tailer 0 %d, committed before the kill %d",
					v, i, counts[v], results[0][v], seen[v])
			}
		}
	}
}

// TestKillRun: three appender slots append with a fast roll while the
// test SIGKILLs their processes at random instants, hundreds of times,
// restarting each under a new writer id, until a last process of each
// slot appends all its messages; a Block and a Park tailer in other
// processes read throughout. Every killed writer's messages arrive as an
// unbroken prefix, the same for both tailers; the last writers' arrive
// complete. Killed processes leave behind what this must survive: busy
// slots, doorbells rung without a wake-up, held lock words, leases,
// cycles rolled but not sealed.
func TestKillRun(t *testing.T) {
	dir := t.TempDir()
	per, kills := 100000, 300
	if testing.Short() {
		per, kills = 20000, 60
	}
	openT(t, dir, Options{Roll: Fast})
	tails := []func() map[int]int{startTail(t, dir, 3, Block), startTail(t, dir, 3, Park)}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	errs := make(chan error, 3)
	for slot := 0; slot < 3; slot++ {
		rng := rand.New(rand.NewPCG(seed, uint64(slot)))
		go func() {
			for k := 0; k < kills/3; k++ {
				cmd := helperCmd(t, "append", dir, 100+1000*slot+k, per, 1)
				out, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					errs <- err
					return
				}
				// Every other victim dies after its first message, so that on
				// a slow machine not every kill lands before any (which
				// would test nothing); the others at any instant after Open.
				r := bufio.NewReader(out)
				r.ReadString('\n') // "started", or EOF if it died
				if k%2 == 1 {
					r.ReadString('\n') // "appending"
				}
				time.Sleep(time.Duration(rng.IntN(25000)) * time.Microsecond)
				reexec.Kill(cmd.Process)
				if err := cmd.Wait(); err != nil && !reexec.Killed(err) {
					errs <- fmt.Errorf("victim %d: %v", 100+1000*slot+k, err)
					return
				}
			}
			cmd := helperCmd(t, "append", dir, slot, per)
			if err := cmd.Run(); err != nil {
				errs <- fmt.Errorf("last appender of slot %d: %v", slot, err)
				return
			}
			errs <- nil
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var results []map[int]int
	for _, wait := range tails {
		results = append(results, wait())
	}
	for i, counts := range results {
		for w := 0; w < 3; w++ {
			if counts[w] != per {
				t.Fatalf("tailer %d saw %d messages of writer %d, want %d", i, counts[w], w, per)
			}
		}
		if len(counts) != len(results[0]) {
			t.Fatalf("tailer %d saw messages of %d writers, tailer 0 of %d", i, len(counts), len(results[0]))
		}
		for w, n := range counts {
			if results[0][w] != n {
				t.Fatalf("writer %d: tailer %d saw %d messages, tailer 0 %d", w, i, n, results[0][w])
			}
		}
	}
	cut, whole := 0, 0
	for w, n := range results[0] {
		if w >= 100 && n > 0 && n < per {
			cut++
		}
		if w >= 100 && n == per {
			whole++
		}
	}
	t.Logf("%d writers killed: %d after some but not all of their messages, %d after all", kills/3*3, cut, whole)
	if cut == 0 {
		t.Fatal("no writer was killed mid-run: the test tested nothing")
	}
}

// readCounts reads a tailer helper's "WRITER COUNT" lines until its output
// ends: the last count it printed for each writer.
func readCounts(r io.Reader) map[int]int {
	counts := map[int]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var w, n int
		fmt.Sscan(sc.Text(), &w, &n)
		counts[w] = n
	}
	return counts
}
