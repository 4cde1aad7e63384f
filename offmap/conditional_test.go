package offmap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
)

func TestConditionalUpdates(t *testing.T) {
	m := openTest(t, small)
	k := []byte("k")
	expect := func(what string, ok bool, err error, want bool) {
		t.Helper()
		if err != nil || ok != want {
			t.Fatalf("%s: %v, %v; want %v", what, ok, err, want)
		}
	}
	ok, err := m.Replace(k, []byte("x"))
	expect("Replace of an absent key", ok, err, false)
	mustMiss(t, m, k)
	ok, err = m.CompareAndSwap(k, nil, []byte("x"))
	expect("CompareAndSwap of an absent key", ok, err, false)
	ok, err = m.CompareAndDelete(k, nil)
	expect("CompareAndDelete of an absent key", ok, err, false)

	ok, err = m.PutIfAbsent(k, []byte("first"))
	expect("PutIfAbsent of an absent key", ok, err, true)
	ok, err = m.PutIfAbsent(k, []byte("second"))
	expect("PutIfAbsent of a present key", ok, err, false)
	mustGet(t, m, k, "first")

	ok, err = m.Replace(k, []byte("a much longer value that needs new chunks"))
	expect("Replace", ok, err, true)
	mustGet(t, m, k, "a much longer value that needs new chunks")

	ok, err = m.CompareAndSwap(k, []byte("a much longer value that needs new chunkz"), []byte("no"))
	expect("CompareAndSwap with another old value", ok, err, false)
	ok, err = m.CompareAndSwap(k, []byte("short"), []byte("no"))
	expect("CompareAndSwap with an old value of another length", ok, err, false)
	ok, err = m.CompareAndSwap(k, []byte("a much longer value that needs new chunks"), []byte("v1"))
	expect("CompareAndSwap", ok, err, true)
	ok, err = m.CompareAndSwap(k, []byte("v1"), []byte("v2"))
	expect("CompareAndSwap of a short value", ok, err, true)
	mustGet(t, m, k, "v2")

	ok, err = m.CompareAndDelete(k, []byte("v1"))
	expect("CompareAndDelete with another old value", ok, err, false)
	ok, err = m.CompareAndDelete(k, []byte("v2"))
	expect("CompareAndDelete", ok, err, true)
	mustMiss(t, m, k)

	// A value that handles point into keeps its size.
	h, err := m.AcquireInt64([]byte("n"))
	if err != nil {
		t.Fatal(err)
	}
	h.Store(41)
	ok, err = m.CompareAndSwap([]byte("n"), le(41), le(42))
	expect("CompareAndSwap of a handle's value", ok, err, true)
	if h.Load() != 42 {
		t.Fatalf("the handle reads %d after the swap, want 42", h.Load())
	}
	if _, err := m.CompareAndSwap([]byte("n"), le(42), []byte("x")); !errors.Is(err, ErrValueSize) {
		t.Fatalf("CompareAndSwap of a handle's value to another size: %v, want ErrValueSize", err)
	}

	// Sizes are checked as Put checks them; nothing changes.
	if _, err := m.PutIfAbsent(make([]byte, 70000), nil); !errors.Is(err, ErrKeyTooLarge) {
		t.Fatalf("PutIfAbsent of a huge key: %v", err)
	}
	if _, err := m.Replace([]byte("n"), make([]byte, 1<<20)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Replace with a huge value: %v", err)
	}
	m.Close()
	if _, err := m.PutIfAbsent(k, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutIfAbsent on a closed map: %v", err)
	}
}

func le(n int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }

func TestPutIfAbsentFull(t *testing.T) {
	m := openTest(t, Options{Entries: 10, AverageKeySize: 8, AverageValueSize: 8, Segments: 1, MaxFileSize: 64 << 10})
	var err error
	n := 0
	for ; err == nil; n++ {
		_, err = m.PutIfAbsent(key(n), val(n))
	}
	if !errors.Is(err, ErrFull) || m.Len() != n-1 {
		t.Fatalf("after %d entries: %v, Len %d", n-1, err, m.Len())
	}
	if ok, err := m.PutIfAbsent(key(0), nil); ok || err != nil {
		t.Fatalf("PutIfAbsent of a present key in a full map: %v, %v", ok, err)
	}
}

// TestConditionalNoAllocations: the four allocate nothing.
func TestConditionalNoAllocations(t *testing.T) {
	m := openTest(t, small)
	k, a, b := []byte("key"), []byte("value-a"), []byte("value-b")
	m.Put(k, a)
	ops := func() {
		m.CompareAndSwap(k, a, b)
		m.CompareAndSwap(k, b, a)
		m.Replace(k, a)
		m.CompareAndDelete(k, a)
		m.PutIfAbsent(k, a)
	}
	ops()
	if n := testing.AllocsPerRun(1000, ops); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// casIncrement adds one to the 8-byte counter at k by a compare-and-swap
// loop, as a client of a map without Update would.
func casIncrement(m *Map, k []byte) error {
	for {
		v, err := m.Get(k)
		if errors.Is(err, ErrNotFound) {
			if ok, err := m.PutIfAbsent(k, le(1)); ok || err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		ok, err := m.CompareAndSwap(k, v, le(int64(binary.LittleEndian.Uint64(v))+1))
		if ok || err != nil {
			return err
		}
	}
}

func init() {
	children["conditional"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		id := os.Getenv("ID")
		out := bufio.NewWriter(os.Stdout)
		defer out.Flush()
		for i := range n {
			if err := casIncrement(m, []byte("total")); err != nil {
				return err
			}
			// Claims: each key goes to exactly one process.
			if ok, err := m.PutIfAbsent(counterKey(i%counters), []byte(id)); err != nil {
				return err
			} else if ok {
				fmt.Fprintln(out, i%counters)
			}
		}
		return nil
	}
}

// TestConditionalAcrossProcesses: three processes increment one counter
// by compare-and-swap loops and race to claim the same keys with
// PutIfAbsent. No increment is lost, and every key is claimed by exactly
// one process, the one whose id it holds.
func TestConditionalAcrossProcesses(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 5000, AverageKeySize: 12, AverageValueSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	n := 20000
	if testing.Short() {
		n = 3000
	}
	claims := make([][]byte, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for id := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := child(t, "conditional", "MAP="+p, "N="+strconv.Itoa(n), "ID="+strconv.Itoa(id))
			cmd.Stderr = os.Stderr
			claims[id], errs[id] = cmd.Output()
		}()
	}
	wg.Wait()
	for id, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", id, err)
		}
	}
	v, err := m.Get([]byte("total"))
	if err != nil || int(binary.LittleEndian.Uint64(v)) != 3*n {
		t.Fatalf("total %v (%v), want %d", v, err, 3*n)
	}
	owner := map[string]int{}
	for id, c := range claims {
		sc := bufio.NewScanner(bytes.NewReader(c))
		for sc.Scan() {
			if prev, dup := owner[sc.Text()]; dup {
				t.Fatalf("key %s claimed by processes %d and %d", sc.Text(), prev, id)
			}
			owner[sc.Text()] = id
		}
	}
	if len(owner) != min(n, counters) {
		t.Fatalf("%d keys claimed, want %d", len(owner), min(n, counters))
	}
	for k, id := range owner {
		i, _ := strconv.Atoi(k)
		if v, err := m.Get(counterKey(i)); err != nil || string(v) != strconv.Itoa(id) {
			t.Fatalf("key %d holds %q (%v), claimed by process %d", i, v, err, id)
		}
	}
}
