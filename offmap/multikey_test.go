package offmap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
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
	children["transfers"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		seed, _ := strconv.Atoi(os.Getenv("SEED"))
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		for range n {
			// Opposite key orders in different processes: the locks are
			// taken in segment order whatever the order of the keys.
			a, b := rng.IntN(8), rng.IntN(7)
			if b >= a {
				b++
			}
			if err := transfer(m, a, b, rng.Int64N(50)); err != nil {
				return err
			}
		}
		return nil
	}
	children["hold-keys"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		keys := [][]byte{account(0), account(1), account(2), account(3)}
		return m.UpdateKeys(keys, func([][]byte, []bool) ([][]byte, []Op) {
			fmt.Println("holding")
			select {} // killed here, holding the segments' locks
		})
	}
}

// TestUpdateKeysAcrossProcesses: processes transfer between accounts while
// this one sums them; one process is killed while it holds the locks of
// several segments, and the others take them over and go on.
func TestUpdateKeysAcrossProcesses(t *testing.T) {
	p := tempPath(t)
	m := openAccounts(t, p, 8)
	defer closeChecked(t, m)

	holder := child(t, "hold-keys", "MAP="+p)
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "holding\n" {
		t.Fatalf("holder said %q", line)
	}
	holder.Process.Kill()
	holder.Wait()

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := child(t, "transfers", "MAP="+p, "N=3000", "SEED="+strconv.Itoa(i))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		if sum, err := total(m, 8); err != nil || sum != 8000 {
			t.Fatalf("a reader saw a total of %d (%v)", sum, err)
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	if sum, err := total(m, 8); err != nil || sum != 8000 {
		t.Fatalf("final total %d, %v", sum, err)
	}
}

// TestUpdateKeysCrash stops UpdateKeys between its changes, as if its
// process died there: the segments stay marked as being changed, so the
// next writer repairs them, and the map is sound again, each change made
// or not.
func TestUpdateKeysCrash(t *testing.T) {
	m := openAccounts(t, tempPath(t), 8)
	defer closeChecked(t, m)
	var a, b []byte // two new keys in different segments
	for i := 0; b == nil; i++ {
		k := fmt.Appendf(nil, "new-%d", i)
		switch {
		case a == nil:
			a = k
		case m.hash(k).seg != m.hash(a).seg:
			b = k
		}
	}
	put := func([][]byte, []bool) ([][]byte, []Op) {
		return [][]byte{le(1), le(2)}, []Op{OpPut, OpPut}
	}
	if !runUntilCrash("insert.alloc", 2, func() { m.UpdateKeys([][]byte{a, b}, put) }) {
		t.Fatal("the second insert was not reached")
	}
	if err := m.Check(); err == nil {
		t.Fatal("Check found nothing after a crash inside UpdateKeys")
	}
	// The next writer of each segment repairs it (no Recover needed).
	for _, k := range [][]byte{a, b} {
		if _, err := m.Has(k); err != nil {
			t.Fatal(err)
		}
		if err := m.Put(k, le(3)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Delete(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if sum, err := total(m, 8); err != nil || sum != 8000 {
		t.Fatalf("total %d, %v", sum, err)
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
	// Deleting makes room: the same UpdateKeys with a delete first succeeds.
	err = m.UpdateKeys([][]byte{key(0), []byte("one-too-many")}, func(v [][]byte, found []bool) ([][]byte, []Op) {
		return [][]byte{nil, le(7)}, []Op{OpDelete, OpPut}
	})
	if err != nil {
		t.Fatal(err)
	}
	mustMiss(t, m, key(0))
	if v, err := m.Get([]byte("one-too-many")); err != nil || balance(v) != 7 {
		t.Fatalf("the insert after the delete: %v %v", v, err)
	}
}
