package offmap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
)

func account(i int) []byte { return fmt.Appendf(nil, "account-%02d", i) }

func balance(v []byte) int64 { return int64(binary.LittleEndian.Uint64(v)) }

// transfer moves amount from account a to account b in one UpdateKeys.
func transfer(m *Map, a, b int, amount int64) error {
	return m.UpdateKeys([][]byte{account(a), account(b)}, func(v [][]byte, found []bool) ([][]byte, []Op) {
		if !found[0] || !found[1] {
			return nil, []Op{OpNone, OpNone}
		}
		return [][]byte{le(balance(v[0]) - amount), le(balance(v[1]) + amount)}, []Op{OpPut, OpPut}
	})
}

// total reads every account through one ViewKeys.
func total(m *Map, n int) (int64, error) {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = account(i)
	}
	var sum int64
	err := m.ViewKeys(keys, func(v [][]byte, found []bool) {
		for i := range v {
			if found[i] {
				sum += balance(v[i])
			}
		}
	})
	return sum, err
}

func openAccounts(t *testing.T, path string, n int) *Map {
	m, err := Open(path, Options{Entries: 1000, AverageKeySize: 10, AverageValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mustPut(t, m, account(i), le(1000))
	}
	segs := map[uint32]bool{}
	for i := range n {
		segs[m.hash(account(i)).seg] = true
	}
	if len(segs) < 2 {
		t.Fatal("the accounts share one segment: the test would not cross segments")
	}
	return m
}

// TestUpdateKeysTransfers: goroutines move money between accounts in
// different segments while readers sum them through ViewKeys: every sum
// they see is exact.
func TestUpdateKeysTransfers(t *testing.T) {
	const accounts = 8
	m := openAccounts(t, tempPath(t), accounts)
	defer closeChecked(t, m)
	var done atomic.Bool
	var wg sync.WaitGroup
	var readErr error
	reads := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			sum, err := total(m, accounts)
			if err == nil && sum != 1000*accounts {
				err = fmt.Errorf("a reader saw a total of %d", sum)
			}
			if err != nil {
				readErr = err
				return
			}
			reads++
		}
	}()
	var writers sync.WaitGroup
	for g := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 3000 {
				a, b := rng.IntN(accounts), rng.IntN(accounts-1)
				if b >= a {
					b++
				}
				if err := transfer(m, a, b, rng.Int64N(50)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	done.Store(true)
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	if sum, err := total(m, accounts); err != nil || sum != 1000*accounts {
		t.Fatalf("final total %d, %v", sum, err)
	}
	if reads == 0 {
		t.Fatal("no read ran alongside the transfers")
	}
}

func TestUpdateKeysErrors(t *testing.T) {
	m := openAccounts(t, tempPath(t), 8)
	defer closeChecked(t, m)
	nop := func(v [][]byte, found []bool) ([][]byte, []Op) { return make([][]byte, len(v)), make([]Op, len(v)) }
	if err := m.UpdateKeys([][]byte{account(0), account(0)}, nop); err == nil {
		t.Fatal("a key twice")
	}
	if err := m.UpdateKeys([][]byte{account(0)}, func([][]byte, []bool) ([][]byte, []Op) { return nil, nil }); err == nil {
		t.Fatal("fn returned no ops")
	}
	h, _ := m.AcquireInt64([]byte("handle"))
	h.Add(1)
	if err := m.UpdateKeys([][]byte{account(0), []byte("handle")}, nop); !errors.Is(err, ErrPinned) {
		t.Fatalf("a handle's value: %v", err)
	}
	// Insert, delete and leave alone in one step.
	err := m.UpdateKeys([][]byte{account(0), account(1), []byte("new")}, func(v [][]byte, found []bool) ([][]byte, []Op) {
		if !found[0] || !found[1] || found[2] {
			t.Errorf("found %v", found)
		}
		return [][]byte{nil, nil, []byte("x")}, []Op{OpDelete, OpNone, OpPut}
	})
	if err != nil {
		t.Fatal(err)
	}
	mustMiss(t, m, account(0))
	mustGet(t, m, []byte("new"), "x")
	if v, _ := m.Get(account(1)); balance(v) != 1000 {
		t.Fatal("OpNone changed a value")
	}
}

func init() {
	// transfer-loop moves money between 2 or 3 accounts (of ACCOUNTS) in
	// one UpdateKeys, forever, until it is killed. With STOP=step:n it
	// stops inside the transaction at the nth arrival at that step, says
	// so and waits to be killed; otherwise it sometimes pauses inside one,
	// so that a kill at a random instant often lands there.
	children["transfer-loop"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		accounts, _ := strconv.Atoi(os.Getenv("ACCOUNTS"))
		seed, _ := strconv.Atoi(os.Getenv("SEED"))
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		if step, nth, ok := strings.Cut(os.Getenv("STOP"), ":"); ok {
			n, _ := strconv.Atoi(nth)
			crashPoint = func(s string) {
				if s == step {
					if n--; n == 0 {
						fmt.Println("stopped")
						time.Sleep(time.Hour) // killed here, inside the transaction
					}
				}
			}
		} else {
			crashPoint = func(s string) {
				if strings.HasPrefix(s, "tx.") && rng.IntN(50) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}
		fmt.Println("ready")
		for {
			a, b, c := rng.IntN(accounts), rng.IntN(accounts), rng.IntN(accounts)
			if a == b || a == c || b == c {
				continue
			}
			amount := rng.Int64N(100)
			keys := [][]byte{account(a), account(b)}
			if rng.IntN(2) == 0 {
				keys = append(keys, account(c))
			}
			err := m.UpdateKeys(keys, func(v [][]byte, found []bool) ([][]byte, []Op) {
				news := [][]byte{le(balance(v[0]) - amount), le(balance(v[1]) + amount)}
				if len(keys) == 3 {
					half := amount / 2
					news[1] = le(balance(v[1]) + half)
					news = append(news, le(balance(v[2])+amount-half))
				}
				return news, []Op{OpPut, OpPut, OpPut}[:len(keys)]
			})
			if err != nil {
				return err
			}
		}
	}
}

// TestUpdateKeysKilledAcrossProcesses: four processes move money between
// accounts in several segments, two or three accounts per UpdateKeys,
// while they are killed (SIGKILL) one after another: at each step of the
// transaction in turn, and at random instants. This process reads the
// total through ViewKeys all along (repairing what the dead left behind,
// as any writer would): every total it sees, and the last, is exact.
func TestUpdateKeysKilledAcrossProcesses(t *testing.T) {
	const accounts, workers = 12, 4
	p := tempPath(t)
	m := openAccounts(t, p, accounts)
	defer closeChecked(t, m)
	stops := []string{"tx.entries:1", "tx.prepared:1", "tx.prepared:2", "tx.committed:1",
		"tx.change:1", "tx.change:2", "tx.change:3", "tx.part:1", "tx.part:2"}
	kills := 4 * len(stops)
	if testing.Short() {
		kills = 2 * len(stops)
	}

	var done atomic.Bool
	readErr := make(chan error, 1)
	reads := 0
	go func() {
		defer close(readErr)
		for !done.Load() {
			sum, err := total(m, accounts)
			if err == nil && sum != 1000*accounts {
				err = fmt.Errorf("a reader saw a total of %d, want %d", sum, 1000*accounts)
			}
			if err != nil {
				readErr <- err
				return
			}
			reads++
		}
	}()

	// A worker told to stop inside a transaction is killed as soon as it
	// says so: others may be waiting for its locks, among them the next
	// one told to stop.
	type worker struct {
		cmd     *exec.Cmd
		stderr  *strings.Builder
		stopped chan struct{} // closed once a worker with STOP is killed there
		stop    string
	}
	start := func(i, seed int, stop string) *worker {
		cmd := child(t, "transfer-loop", "MAP="+p, "ACCOUNTS="+strconv.Itoa(accounts),
			"SEED="+strconv.Itoa(seed), "STOP="+stop)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		w := &worker{cmd: cmd, stderr: new(strings.Builder), stopped: make(chan struct{}), stop: stop}
		cmd.Stderr = w.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(stdout)
		if line, _ := out.ReadString('\n'); line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("worker %d said %q: %s", i, line, w.stderr)
		}
		if stop != "" {
			go func() {
				if line, _ := out.ReadString('\n'); line == "stopped\n" {
					reexec.Kill(cmd.Process)
					close(w.stopped)
				}
			}()
		}
		return w
	}
	end := func(i int, w *worker) {
		if w.stop != "" {
			select {
			case <-w.stopped:
			case <-time.After(time.Minute):
				w.cmd.Process.Kill()
				w.cmd.Wait()
				t.Fatalf("worker %d never reached STOP=%s: %s", i, w.stop, w.stderr)
			}
		}
		reexec.Kill(w.cmd.Process)
		if err := w.cmd.Wait(); !reexec.Killed(err) {
			t.Fatalf("worker %d ended before it was killed: %v: %s", i, err, w.stderr)
		}
	}
	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = start(i, i, "")
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for k := range kills {
		i := k % workers
		if ws[i].stop == "" {
			time.Sleep(time.Duration(rng.IntN(20)+1) * time.Millisecond)
		}
		end(i, ws[i])
		// Every other restart stops at the next step of the transaction.
		stop := ""
		if k%2 == 0 {
			stop = stops[k/2%len(stops)]
		}
		ws[i] = start(i, workers+k, stop)
	}
	for i, w := range ws {
		end(i, w)
	}
	done.Store(true)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	if reads == 0 {
		t.Fatal("no read ran alongside the transfers")
	}
	if sum, err := total(m, accounts); err != nil || sum != 1000*accounts {
		t.Fatalf("final total %d, %v", sum, err)
	}
	// The last workers died holding locks, some of segments no read has
	// needed since: Recover takes them over, and finds the same total.
	if _, err := m.Recover(); err != nil {
		t.Fatal(err)
	}
	if sum, err := total(m, accounts); err != nil || sum != 1000*accounts {
		t.Fatalf("total after Recover %d, %v", sum, err)
	}
	if m.Len() != accounts {
		t.Fatalf("Len = %d, want %d", m.Len(), accounts)
	}
	// What a process that opens the file later reads.
	m2, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if sum, err := total(m2, accounts); err != nil || sum != 1000*accounts {
		t.Fatalf("total in a new read-only open: %d, %v", sum, err)
	}
}

// TestUpdateKeysAllOrNothing: when one change does not fit (the map may not
// grow past its starting size), none is made.
func TestUpdateKeysAllOrNothing(t *testing.T) {
	m := openTest(t, Options{Entries: 20, AverageKeySize: 8, AverageValueSize: 8, Segments: 1, MaxFileSize: 64 << 10})
	var err error
	n := 0
	for ; err == nil; n++ {
		err = m.Put(key(n), le(int64(n)))
	}
	if !errors.Is(err, ErrFull) {
		t.Fatal(err)
	}
	// Change a present key and insert one that no longer fits.
	err = m.UpdateKeys([][]byte{key(0), []byte("one-too-many")}, func(v [][]byte, found []bool) ([][]byte, []Op) {
		return [][]byte{le(-1), le(-1)}, []Op{OpPut, OpPut}
	})
	if !errors.Is(err, ErrFull) {
		t.Fatalf("UpdateKeys over a full segment: %v, want ErrFull", err)
	}
	if v, _ := m.Get(key(0)); balance(v) != 0 {
		t.Fatalf("the first change was made: %d", balance(v))
	}
	// A value that needs new chunks the segment lacks, after a change that fits.
	big := make([]byte, 200)
	err = m.UpdateKeys([][]byte{key(1), key(2)}, func(v [][]byte, found []bool) ([][]byte, []Op) {
		return [][]byte{le(-1), big}, []Op{OpPut, OpPut}
	})
	if !errors.Is(err, ErrFull) && !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("UpdateKeys with a value that does not fit: %v", err)
	}
	if v, _ := m.Get(key(1)); balance(v) != 1 {
		t.Fatalf("the first change was made: %d", balance(v))
	}
	// New values are written beside the old ones until the transaction
	// commits, so a delete makes no room for an insert in the same
	// UpdateKeys: ErrFull, and the key to delete stays.
	swap := func(v [][]byte, found []bool) ([][]byte, []Op) {
		return [][]byte{nil, le(7)}, []Op{OpDelete, OpPut}
	}
	if err := m.UpdateKeys([][]byte{key(0), []byte("one-too-many")}, swap); !errors.Is(err, ErrFull) {
		t.Fatalf("delete and insert in one UpdateKeys on a full map: %v, want ErrFull", err)
	}
	mustGet(t, m, key(0), string(le(0)))
	// Deleting first makes room.
	if _, err := m.Delete(key(0)); err != nil {
		t.Fatal(err)
	}
	if err := m.Put([]byte("one-too-many"), le(7)); err != nil {
		t.Fatal(err)
	}
}

// TestMultiKeyNoAlloc: once warm, UpdateKeys and ViewKeys allocate
// nothing (their memory is pooled), also with an insert and a delete in
// the transaction.
func TestMultiKeyNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items on purpose")
	}
	const accounts = 4
	m := openAccounts(t, tempPath(t), accounts)
	defer closeChecked(t, m)
	keys := [][]byte{account(0), account(1), account(2), account(3), []byte("extra")}
	news := make([][]byte, len(keys))
	for i := range news {
		news[i] = make([]byte, 8)
	}
	ops := make([]Op, len(keys))
	var sum int64
	move := func(v [][]byte, found []bool) ([][]byte, []Op) {
		for i := range accounts {
			d := int64(1)
			if i%2 == 1 {
				d = -1
			}
			binary.LittleEndian.PutUint64(news[i], uint64(balance(v[i])+d))
			ops[i] = OpPut
		}
		ops[accounts] = OpPut // the extra key comes and goes
		if found[accounts] {
			ops[accounts] = OpDelete
		}
		return news, ops
	}
	view := func(v [][]byte, found []bool) {
		sum = 0
		for i := range accounts {
			sum += balance(v[i])
		}
	}
	for name, f := range map[string]func(){
		"UpdateKeys": func() {
			if err := m.UpdateKeys(keys, move); err != nil {
				t.Fatal(err)
			}
		},
		"ViewKeys": func() {
			if err := m.ViewKeys(keys, view); err != nil {
				t.Fatal(err)
			}
		},
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
	if sum != 1000*accounts {
		t.Fatalf("the accounts sum to %d, want %d", sum, 1000*accounts)
	}
}

// TestMultiKeyScratchReuse: calls of different sizes one after another,
// on the pooled memory, each see exactly their own keys: an absent key is
// nil and not found, whatever the call before held in its place.
func TestMultiKeyScratchReuse(t *testing.T) {
	m := openAccounts(t, tempPath(t), 4)
	defer closeChecked(t, m)
	all := [][]byte{account(0), account(1), account(2), account(3), []byte("gone")}
	mustPut(t, m, []byte("gone"), []byte("0123456789"))
	check := func(keys [][]byte, want []string) func([][]byte, []bool) {
		return func(v [][]byte, found []bool) {
			if len(v) != len(keys) || len(found) != len(keys) {
				t.Fatalf("%d values and %d flags for %d keys", len(v), len(found), len(keys))
			}
			for i := range keys {
				switch {
				case want[i] == "" && (found[i] || v[i] != nil):
					t.Errorf("%s: found %v, value %q; want absent and nil", keys[i], found[i], v[i])
				case want[i] != "" && (!found[i] || string(v[i]) != want[i] || cap(v[i]) != len(v[i])):
					t.Errorf("%s: found %v, value %q (cap %d); want %q", keys[i], found[i], v[i], cap(v[i]), want[i])
				}
			}
		}
	}
	bal := string(le64(1000))
	if err := m.ViewKeys(all, check(all, []string{bal, bal, bal, bal, "0123456789"})); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	short := [][]byte{[]byte("gone"), account(2)}
	if err := m.ViewKeys(short, check(short, []string{"", bal})); err != nil {
		t.Fatal(err)
	}
	err := m.UpdateKeys(all, func(v [][]byte, found []bool) ([][]byte, []Op) {
		check(all, []string{bal, bal, bal, bal, ""})(v, found)
		return make([][]byte, len(all)), make([]Op, len(all)) // OpNone
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ViewKeys(all, check(all, []string{bal, bal, bal, bal, ""})); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyAfterKilledUpdateKeys: a writer killed inside UpdateKeys
// leaves its segments odd and locked by a dead holder; a read-only process
// cannot repair them, so it reads through the transaction's records. It
// must decide once that the writer is dead, not wait staleAfter on every
// read of those segments.
func TestReadOnlyAfterKilledUpdateKeys(t *testing.T) {
	const accounts = 12
	p := tempPath(t)
	openAccounts(t, p, accounts).Close()
	for _, stop := range []string{"tx.prepared:2", "tx.committed:1", "tx.change:2"} {
		t.Run(stop, func(t *testing.T) {
			cmd := child(t, "transfer-loop", "MAP="+p, "ACCOUNTS="+strconv.Itoa(accounts), "SEED=7", "STOP="+stop)
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			out := bufio.NewReader(stdout)
			for _, want := range []string{"ready\n", "stopped\n"} {
				if line, _ := out.ReadString('\n'); line != want {
					t.Fatalf("worker said %q, want %q", line, want)
				}
			}
			cmd.Process.Kill()
			cmd.Wait()

			ro, err := Open(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			odd := 0
			for i := range ro.hdr.Segments {
				if ro.segment(i).hdr.version.Load()&1 != 0 {
					odd++
				}
			}
			if odd == 0 {
				t.Fatal("no segment odd after the kill: the test would not test")
			}
			waits := staleWaits.Load()
			for round := range 1000 / accounts {
				sum := int64(0)
				for i := range accounts {
					v, err := ro.Get(account(i))
					if err != nil {
						t.Fatal(err)
					}
					sum += balance(v)
				}
				if sum != 1000*accounts {
					t.Fatalf("read-only Gets sum to %d, want %d", sum, 1000*accounts)
				}
				if n := staleWaits.Load() - waits; n > 1 {
					t.Fatalf("read-only Gets waited %d times for one dead writer by round %d, want once", n, round+1)
				}
			}
			// A writer repairs; the next transaction starts from there.
			m, err := Open(p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if sum, err := total(m, accounts); err != nil || sum != 1000*accounts {
				t.Fatalf("after the repair: total %d, %v", sum, err)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			m.Close()
		})
	}
}
