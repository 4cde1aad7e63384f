package offmap

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// TestGetMany: GetMany answers every key as Get does, in order, in a map
// grown well past its starting size (entries in grown extents and
// tables), for absent and oversized keys and batches of every length.
func TestGetMany(t *testing.T) {
	m := openTest(t, Options{Entries: 64, MaxKeySize: 32})
	const n = 5000
	for i := range n {
		if err := m.Put([]byte("key-"+strconv.Itoa(i)), bytes.Repeat([]byte{byte(i)}, i%100)); err != nil {
			t.Fatal(err)
		}
	}
	var keys [][]byte
	for i := 0; i < n+n/4; i += 1 + i%3 { // past n: absent keys
		keys = append(keys, []byte("key-"+strconv.Itoa(i)))
	}
	keys = append(keys, bytes.Repeat([]byte("k"), 33), []byte{}) // longer than MaxKeySize; empty
	for _, count := range []int{0, 1, getManyBatch - 1, getManyBatch, getManyBatch + 1, len(keys)} {
		next := 0
		err := m.GetMany(keys[:count], func(i int, v []byte, found bool) {
			if i != next {
				t.Fatalf("key %d answered at %d", i, next)
			}
			next++
			want, err := m.Get(keys[i])
			if found != (err == nil) || !bytes.Equal(v, want) || (!found && v != nil) {
				t.Errorf("GetMany(%q) = %q, %v; Get = %q, %v", keys[i], v, found, want, err)
			}
		})
		if err != nil || next != count {
			t.Fatalf("GetMany of %d keys: %d answers, %v", count, next, err)
		}
	}
	if a := testing.AllocsPerRun(100, func() { m.GetMany(keys[:100], func(int, []byte, bool) {}) }); a != 0 && !raceEnabled { // the race detector's sync.Pool drops some Puts
		t.Errorf("GetMany allocates %v times a call", a)
	}
	m.Close()
	if err := m.GetMany(keys[:1], func(int, []byte, bool) { t.Error("fn called on a closed map") }); !errors.Is(err, ErrClosed) {
		t.Errorf("GetMany on a closed map: %v", err)
	}
}

// TestGetManyWhileWriting: while writers rewrite every value (each value
// is its key followed by a round number) and the map grows, every value
// GetMany returns is one that was put for that key, whole.
func TestGetManyWhileWriting(t *testing.T) {
	m := openTest(t, Options{Entries: 64})
	const n = 2000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("k%05d", i))
		if err := m.Put(keys[i], append(keys[i], "/0"...)); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; !stop.Load(); round++ {
				for i := w; i < n; i += 2 {
					v := append(append([]byte{}, keys[i]...), fmt.Sprintf("/%d%s", round, bytes.Repeat([]byte("x"), round%50))...)
					if err := m.Put(keys[i], v); err != nil {
						t.Error(err)
						return
					}
				}
				if err := m.Put([]byte(fmt.Sprintf("grow-%d-%d", w, round)), nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for pass := 0; pass < 30; pass++ {
		err := m.GetMany(keys, func(i int, v []byte, found bool) {
			if !found || !bytes.HasPrefix(v, append(keys[i], '/')) {
				t.Fatalf("pass %d: key %q read %q, %v", pass, keys[i], v, found)
			}
			tail := bytes.TrimLeft(v[len(keys[i])+1:], "0123456789")
			if len(tail) != bytes.Count(tail, []byte("x")) {
				t.Fatalf("pass %d: key %q read a torn value %q", pass, keys[i], v)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
}
