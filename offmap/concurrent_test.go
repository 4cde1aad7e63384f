package offmap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestGoroutines hammers one map from many goroutines with every operation
// at once. The map lives in heap memory here, so that `go test -race` sees
// every access (it cannot see mapped memory). Readers check that a value
// is always one a writer stored whole for that key, never a torn mix.
func TestGoroutines(t *testing.T) {
	m, err := openHeap(Options{Entries: 4000, AverageKeySize: 8, AverageValueSize: 24, MaxValueSize: 200, Segments: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const keys, goroutines = 200, 8
	iters := 20000
	if testing.Short() || raceEnabled {
		iters = 3000
	}
	// A value is the key's number repeated, so a reader can tell a torn one.
	valueFor := func(k, n int) []byte { return bytes.Repeat([]byte{byte(k)}, n) }
	var wg sync.WaitGroup
	var incs [goroutines]int
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			buf := make([]byte, 0, 256)
			for range iters {
				k := rng.IntN(keys)
				kb := fmt.Appendf(nil, "k%03d", k)
				switch op := rng.IntN(100); {
				case op < 30:
					if err := m.Put(kb, valueFor(k, 1+rng.IntN(150))); err != nil {
						t.Error(err)
						return
					}
				case op < 40:
					m.Delete(kb)
				case op < 50:
					if err := m.Update([]byte("shared-counter"), incr); err != nil {
						t.Error(err)
						return
					}
					incs[g]++
				case op < 55:
					n := 0
					m.Range(func(k, v []byte) bool { n++; return n < 20 })
				default:
					v, err := m.AppendValue(buf[:0], kb)
					if err == nil && (len(v) == 0 || bytes.Count(v, []byte{byte(k)}) != len(v)) {
						t.Errorf("torn read of %s: %v", kb, v)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range incs {
		total += n
	}
	v, _ := m.Get([]byte("shared-counter"))
	if got := int(binary.LittleEndian.Uint64(v)); got != total {
		t.Fatalf("shared counter = %d, increments %d", got, total)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestHandlesAndUpdateTogether: handle adds (lock-free) and Update
// increments (locked, compare-and-swap on pinned values) on one counter
// from many goroutines lose nothing.
func TestHandlesAndUpdateTogether(t *testing.T) {
	m, err := openHeap(small)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h, _ := m.AcquireInt64([]byte("n"))
	const goroutines = 4
	n := 20000
	if raceEnabled {
		n = 2000
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if g%2 == 0 {
					h.Add(1)
				} else if err := m.Update([]byte("n"), incr); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := h.Load(); got != goroutines*int64(n) {
		t.Fatalf("counter = %d, want %d", got, goroutines*n)
	}
}
