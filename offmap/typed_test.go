package offmap

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// clientStats is the example: two counters and an array of them
// in one value.
type clientStats struct {
	Hits, Bytes atomic.Int64
	Buckets     [16]atomic.Uint32
	Flags       uint8
}

func TestAcquireTyped(t *testing.T) {
	m := openTest(t, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 128})
	st, err := Acquire[clientStats](m, []byte("c1"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := Acquire[clientStats](m, []byte("c1"))
			if err != nil || h != st {
				t.Errorf("goroutine %d: %p %v, want the same address %p", g, h, err, st)
				return
			}
			for i := range 1000 {
				h.Hits.Add(1)
				h.Bytes.Add(int64(i))
				h.Buckets[i%16].Add(1)
			}
		}()
	}
	wg.Wait()
	if st.Hits.Load() != 4000 || st.Bytes.Load() != 4*999*1000/2 || st.Buckets[3].Load() != 4*inBucket(1000, 3) {
		t.Fatalf("hits %d, bytes %d, bucket 3 %d", st.Hits.Load(), st.Bytes.Load(), st.Buckets[3].Load())
	}
	// The value is the struct's memory: Get sees it, and it is pinned.
	v, err := m.Get([]byte("c1"))
	if err != nil || len(v) != int(sizeofStats) {
		t.Fatalf("Get: %d bytes, %v", len(v), err)
	}
	if err := m.Put([]byte("c1"), []byte("short")); !errors.Is(err, ErrValueSize) {
		t.Fatalf("Put of another size over a typed value: %v", err)
	}
	if _, err := Acquire[atomic.Int64](m, []byte("c1")); !errors.Is(err, ErrValueSize) {
		t.Fatalf("Acquire of another type's size: %v", err)
	}
	// A read-modify-write of the whole value would lose the adds that
	// handles make meanwhile: refused.
	if err := m.Update([]byte("c1"), func(v []byte, _ bool) ([]byte, Op) { return v, OpPut }); !errors.Is(err, ErrPinned) {
		t.Fatalf("Update of a typed value: %v, want ErrPinned", err)
	}
	cur, _ := m.Get([]byte("c1"))
	if _, err := m.CompareAndSwap([]byte("c1"), cur, cur); !errors.Is(err, ErrPinned) {
		t.Fatalf("CompareAndSwap of a typed value: %v, want ErrPinned", err)
	}
	// Another type of the same size sees the same bytes.
	if n, err := Acquire[atomic.Int64](m, []byte("n")); err != nil || n.Add(2) != 2 {
		t.Fatalf("Acquire[atomic.Int64]: %v", err)
	}
	h64, _ := m.AcquireInt64([]byte("n"))
	if h64.Load() != 2 {
		t.Fatalf("an Int64 handle reads %d", h64.Load())
	}
}

var sizeofStats = reflect.TypeFor[clientStats]().Size()

func TestAcquireRejectsTypes(t *testing.T) {
	m := openTest(t, small)
	k := []byte("k")
	for name, err := range map[string]error{
		"string":  func() error { _, err := Acquire[struct{ S string }](m, k); return err }(),
		"slice":   func() error { _, err := Acquire[struct{ B []byte }](m, k); return err }(),
		"pointer": func() error { _, err := Acquire[atomic.Pointer[int]](m, k); return err }(),
		"int":     func() error { _, err := Acquire[struct{ N int }](m, k); return err }(),
		"bool":    func() error { _, err := Acquire[[4]bool](m, k); return err }(),
		"mutex":   func() error { _, err := Acquire[struct{ Mu sync.Mutex }](m, k); return err }(),
		"empty":   func() error { _, err := Acquire[struct{}](m, k); return err }(),
		"any":     func() error { _, err := Acquire[atomic.Value](m, k); return err }(),
	} {
		if !errors.Is(err, ErrHandleType) {
			t.Errorf("%s: %v, want ErrHandleType", name, err)
		}
	}
	if _, err := Acquire[struct{ N int }](m, k); err == nil || !strings.Contains(err.Error(), ".N is int") {
		t.Errorf("the error does not name the field: %v", err)
	}
	if has, _ := m.Has(k); has {
		t.Fatal("a rejected Acquire created the entry")
	}
}

func init() {
	children["typed-add"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		st, err := Acquire[clientStats](m, []byte("shared"))
		if err != nil {
			return err
		}
		for i := range n {
			st.Hits.Add(1)
			st.Buckets[i%16].Add(1)
		}
		return nil
	}
}

// TestAcquireTypedAcrossProcesses: processes add to the fields of one
// typed value; every add is counted.
func TestAcquireTypedAcrossProcesses(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	st, err := Acquire[clientStats](m, []byte("shared")) // before the others start
	if err != nil {
		t.Fatal(err)
	}
	const n = 50000
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := child(t, "typed-add", "MAP="+p, "N="+strconv.Itoa(n))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("child: %v\n%s", err, out)
			}
		}()
	}
	for i := range n {
		st.Hits.Add(1)
		st.Buckets[i%16].Add(1)
	}
	wg.Wait()
	for b := range 16 {
		if st.Buckets[b].Load() != 4*inBucket(n, b) {
			t.Fatalf("bucket %d holds %d, want %d", b, st.Buckets[b].Load(), 4*inBucket(n, b))
		}
	}
	if st.Hits.Load() != 4*n {
		t.Fatalf("hits %d, want %d", st.Hits.Load(), 4*n)
	}
}

// inBucket counts the i in [0, n) with i%16 == b.
func inBucket(n, b int) uint32 { return uint32((n - b + 15) / 16) }
