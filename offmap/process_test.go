package offmap

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/internal/shm"
)

const counters = 1000

func counterKey(i int) []byte { return fmt.Appendf(nil, "counter-%04d", i) }

func init() {
	children["add"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		hs := make([]interface{ Add(int64) int64 }, counters)
		for i := range hs {
			h, err := m.AcquireInt64(counterKey(i))
			if err != nil {
				return err
			}
			hs[i] = h
		}
		for i := range n {
			hs[i%counters].Add(1)
		}
		return nil
	}
	children["update"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		for i := range n {
			if err := m.Update(counterKey(i%counters), incrDecimal); err != nil {
				return err
			}
		}
		return nil
	}
}

// incrDecimal increments a counter stored as decimal text padded with
// spaces to a length that varies with the count, so that increments
// exercise in-place rewrites, shrinking and relocation.
func incrDecimal(v []byte, found bool) ([]byte, Op) {
	n := 0
	if found {
		n, _ = strconv.Atoi(string(bytes.TrimRight(v, " ")))
	}
	n++
	out := strconv.AppendInt(v[:0], int64(n), 10)
	for range (n % 4) * 9 {
		out = append(out, ' ')
	}
	return out, OpPut
}

func decimal(t testing.TB, m *Map, k []byte) int {
	v, err := m.Get(k)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(string(bytes.TrimRight(v, " ")))
	if err != nil {
		t.Fatalf("%s holds %q", k, v)
	}
	return n
}

func counterOptions() Options {
	return Options{Entries: 2 * counters, AverageKeySize: 12, AverageValueSize: 16, MaxValueSize: 64}
}

// runChildren starts procs children of role and waits for all of them.
func runChildren(t *testing.T, procs int, role string, env ...string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := child(t, role, env...).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("child %d: %v\n%s", i, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func perProcess(t *testing.T) int {
	if testing.Short() {
		return 25000
	}
	return 250000
}

// TestProcessesAddThroughHandles: 4 processes add 1 through value handles
// spread over 1,000 shared counters; every increment is counted.
func TestProcessesAddThroughHandles(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, counterOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	n := perProcess(t)
	runChildren(t, 4, "add", "MAP="+p, "N="+strconv.Itoa(n))
	for i := range counters {
		h, _ := m.AcquireInt64(counterKey(i))
		if got, want := h.Load(), int64(4*n/counters); got != want {
			t.Fatalf("counter %d = %d, want %d", i, got, want)
		}
	}
}

// TestProcessesUpdate: the same through the locked read-modify-write.
func TestProcessesUpdate(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, counterOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	n := perProcess(t)
	runChildren(t, 4, "update", "MAP="+p, "N="+strconv.Itoa(n))
	for i := range counters {
		if got, want := decimal(t, m, counterKey(i)), 4*n/counters; got != want {
			t.Fatalf("counter %d = %d, want %d", i, got, want)
		}
	}
}

// ackLog is a file each killable writer reports to through shared memory,
// which survives its death: per writer, the counter of the increment in
// flight (pending, 1-based; 0 when none) and the increments acknowledged
// per counter. A word at the start tells writers to stop.
type ackLog struct {
	mp  *shm.Mapping
	mem []byte
}

const ackWriterBytes = 8 * (1 + counters)

func openAckLog(path string, writers int, create bool) (*ackLog, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := 8 + writers*ackWriterBytes
	if create {
		if err := shm.Preallocate(f, int64(size)); err != nil {
			return nil, err
		}
	}
	mp, err := shm.Map(f, 0, size, true)
	if err != nil {
		return nil, err
	}
	return &ackLog{mp: mp, mem: mp.Bytes()}, nil
}

func (a *ackLog) stop() *atomic.Uint64 { return shm.U64(a.mem, 0) }
func (a *ackLog) pending(w int) *atomic.Uint64 {
	return shm.U64(a.mem, 8+w*ackWriterBytes)
}
func (a *ackLog) acks(w, c int) *atomic.Uint64 {
	return shm.U64(a.mem, 8+w*ackWriterBytes+8+8*c)
}

func init() {
	children["killable"] = func() error {
		slot, _ := strconv.Atoi(os.Getenv("SLOT"))
		writers, _ := strconv.Atoi(os.Getenv("WRITERS"))
		log, err := openAckLog(os.Getenv("ACKS"), writers, false)
		if err != nil {
			return err
		}
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
		for log.stop().Load() == 0 {
			c := rng.IntN(counters)
			log.pending(slot).Store(uint64(c) + 1)
			if err := m.Update(counterKey(c), incrDecimal); err != nil {
				return err
			}
			log.acks(slot, c).Add(1)
			log.pending(slot).Store(0)
		}
		return nil
	}
}

// TestKilledWriters runs writers that increment random counters through
// Update while the test SIGKILLs one of them at random instants and starts
// a replacement. In the end every counter must equal the increments the
// writers acknowledged, plus at most the one each killed writer had in
// flight on that counter, and Check must pass.
func TestKilledWriters(t *testing.T) {
	const writers = 3
	kills := 8
	if testing.Short() {
		kills = 3
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "counters.map")
	m, err := Open(p, Options{Entries: 2 * counters, AverageKeySize: 12, AverageValueSize: 16, MaxValueSize: 64, LockTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	slots := writers + kills // one ack slot per process ever started
	logPath := filepath.Join(dir, "acks")
	log, err := openAckLog(logPath, slots, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.mp.Unmap() }) // before TempDir's RemoveAll: Windows keeps a mapped file
	start := func(slot int) *exec.Cmd {
		cmd := child(t, "killable", "MAP="+p, "ACKS="+logPath, "SLOT="+strconv.Itoa(slot), "WRITERS="+strconv.Itoa(slots))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	running := make([]*exec.Cmd, writers)
	slotOf := make([]int, writers)
	for i := range running {
		running[i], slotOf[i] = start(i), i
	}
	var killed []int
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for k := range kills {
		// Let the writers make progress, then kill one at a random instant.
		before := totalAcks(log, slots)
		for totalAcks(log, slots) < before+uint64(500+rng.IntN(3000)) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		victim := rng.IntN(writers)
		reexec.Kill(running[victim].Process)
		running[victim].Wait()
		killed = append(killed, slotOf[victim])
		running[victim], slotOf[victim] = start(writers+k), writers+k
	}
	// Survivors and replacements go on a little, then stop cleanly.
	before := totalAcks(log, slots)
	for totalAcks(log, slots) < before+2000 {
		time.Sleep(time.Millisecond)
	}
	log.stop().Store(1)
	for _, cmd := range running {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer failed: %v", err)
		}
	}
	inFlight := make(map[int]int) // counter -> killed writers that had it pending
	for _, s := range killed {
		if c := log.pending(s).Load(); c != 0 {
			inFlight[int(c-1)]++
		}
	}
	var total, extra int
	for c := range counters {
		acked := 0
		for s := range slots {
			acked += int(log.acks(s, c).Load())
		}
		got := decimal(t, m, counterKey(c))
		if got < acked || got > acked+inFlight[c] {
			t.Fatalf("counter %d = %d: acknowledged %d, in flight at kills %d", c, got, acked, inFlight[c])
		}
		total += acked
		extra += got - acked
	}
	t.Logf("%d increments acknowledged, %d kills, %d in-flight increments completed", total, len(killed), extra)
}

func totalAcks(log *ackLog, slots int) uint64 {
	var n uint64
	for s := range slots {
		for c := range counters {
			n += log.acks(s, c).Load()
		}
	}
	return n
}
