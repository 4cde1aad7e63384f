package offmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/offmap/offmap/values"
)

var evicting = Options{Entries: 2000, AverageKeySize: 16, AverageValueSize: 16, Segments: 4, Evict: true}

// A map that evicts takes any number of distinct keys: no Put fails, it
// never holds more than its bound, and what it holds reads back right.
func TestEvictBound(t *testing.T) {
	m := openTest(t, evicting)
	for i := range 20000 {
		if err := m.Put(key(i), val(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if n := m.Len(); n > 2000 {
			t.Fatalf("after %d puts: %d entries, bound 2000", i+1, n)
		}
	}
	st := m.Stats()
	if st.Len < 1900 || st.Evictions != int64(20000-st.Len) {
		t.Fatalf("Len %d, Evictions %d after 20000 puts", st.Len, st.Evictions)
	}
	present := 0
	for i := range 20000 {
		v, err := m.Get(key(i))
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			t.Fatal(err)
		case string(v) != string(val(i)):
			t.Fatalf("key %d: %q", i, v)
		default:
			present++
		}
	}
	if present != st.Len {
		t.Fatalf("%d keys read back, Len %d", present, st.Len)
	}
}

// Keys read often survive a one-time scan of many cold keys.
func TestEvictScanResistant(t *testing.T) {
	m := openTest(t, evicting)
	hot := 200
	for range 5 {
		for i := range hot {
			if _, err := m.Get(key(i)); errors.Is(err, ErrNotFound) {
				mustPut(t, m, key(i), val(i))
			}
		}
	}
	for i := range 10000 {
		mustPut(t, m, key(1_000_000+i), val(i))
	}
	kept := 0
	for i := range hot {
		if ok, _ := m.Has(key(i)); ok {
			kept++
		}
	}
	if kept < hot*9/10 {
		t.Fatalf("%d of %d hot keys survived a scan of 10000 cold ones", kept, hot)
	}
}

// Entries that value handles point into are never evicted.
func TestEvictSparesPinned(t *testing.T) {
	m := openTest(t, evicting)
	for i := 0; i < 300; i++ {
		h, err := m.AcquireInt64(key(i))
		if err != nil {
			t.Fatal(err)
		}
		h.Store(int64(i))
	}
	for i := range 50000 {
		mustPut(t, m, key(10_000+i), val(i))
	}
	for i := range 300 {
		v, err := m.Get(key(i))
		if err != nil || len(v) != 8 || int(v[0])|int(v[1])<<8 != i {
			t.Fatalf("pinned key %d: %x, %v", i, v, err)
		}
	}
}

// Expired entries are evicted before live ones.
func TestEvictExpiredFirst(t *testing.T) {
	opts := evicting
	opts.Expiring = true
	m := openTest(t, opts)
	clock := time.Now().UnixNano()
	now = func() int64 { return clock }
	t.Cleanup(func() { now = func() int64 { return time.Now().UnixNano() } })
	// Fill: half the room with entries that expire soon, the rest with
	// entries that do not.
	for i := range 4000 {
		at := time.Time{}
		if i%2 == 0 {
			at = time.Unix(0, clock+int64(time.Second))
		}
		if err := m.PutExpiring(key(i), val(i), at); err != nil {
			t.Fatal(err)
		}
	}
	live := 0
	for i := 1; i < 4000; i += 2 {
		if ok, _ := m.Has(key(i)); ok {
			live++
		}
	}
	clock += int64(2 * time.Second)
	for i := range 600 {
		mustPut(t, m, key(100_000+i), val(i))
	}
	for i := 1; i < 4000; i += 2 {
		if ok, _ := m.Has(key(i)); ok {
			live--
		}
	}
	if live != 0 {
		t.Fatalf("%d live entries evicted while expired ones remained", live)
	}
}

// Updates that need a larger value make room too, never losing the key
// being updated.
func TestEvictLargerValues(t *testing.T) {
	m := openTest(t, Options{Entries: 1000, AverageKeySize: 16, AverageValueSize: 64, MaxValueSize: 4096, Segments: 2, Evict: true, MaxFileSize: 1 << 20})
	rng := rand.New(rand.NewPCG(1, 2))
	last := map[int]string{}
	for i := range 20000 {
		k := rng.IntN(3000)
		v := fmt.Sprintf("%d:%0*d", i, 8+rng.IntN(4000), k)
		if err := m.Put(key(k), []byte(v)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		last[k] = v
		if got, err := m.Get(key(k)); err != nil || string(got) != v {
			t.Fatalf("key %d right after its put: %.20q, %v", k, got, err)
		}
	}
	if st := m.Stats(); st.FileSize > 1<<20 {
		t.Fatalf("file of %d bytes, bound %d", st.FileSize, 1<<20)
	}
	for k, v := range last {
		got, err := m.Get(key(k))
		if err == nil && string(got) != v {
			t.Fatalf("key %d: a stale value", k)
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
}

// fullUngrowable returns a map that evicts, of one segment, whose file
// may not grow, holding 100 entries of 140-byte values: nearly all of
// its entry space.
func fullUngrowable(t *testing.T) *Map {
	opts := Options{Entries: 100, AverageKeySize: 16, AverageValueSize: 100, MaxValueSize: 1000, Segments: 1, Evict: true}
	probe := openTest(t, opts)
	opts.MaxFileSize = probe.Stats().StartFileSize // no growth: room is made by evicting
	m := openTest(t, opts)
	for i := range 100 {
		mustPut(t, m, key(i), make([]byte, 140))
	}
	return m
}

// A value that grows past the room left is stored after evicting others,
// never its own entry, even when that entry is the next to go.
func TestEvictSparesEntryBeingUpdated(t *testing.T) {
	m := fullUngrowable(t)
	big := make([]byte, 1000)
	big[0] = 7
	// key 0 is the oldest entry of the small FIFO, read once (by the
	// update): the first candidate.
	if err := m.Put(key(0), big); err != nil {
		t.Fatal(err)
	}
	if v, err := m.Get(key(0)); err != nil || len(v) != 1000 || v[0] != 7 {
		t.Fatalf("key 0 after its update: %d bytes, %v", len(v), err)
	}
	if st := m.Stats(); st.Evictions == 0 || st.FileSize != st.StartFileSize {
		t.Fatalf("%d evictions, file %d bytes from %d", st.Evictions, st.FileSize, st.StartFileSize)
	}
}

// FuzzEvictOperations runs random operations on a small map that evicts
// against a model that allows any key to have been evicted, but never a
// wrong value; keys that value handles pin must never go.
func FuzzEvictOperations(f *testing.F) {
	f.Add([]byte{0, 1, 5, 0, 2, 9, 9, 3, 1, 4, 2, 9, 8, 0, 0, 0, 7, 7, 3, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		m, err := openHeap(Options{Entries: 16, AverageKeySize: 2, AverageValueSize: 8, MaxValueSize: 64, Segments: 2, Evict: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		model := map[string]string{} // what a key holds if it was not evicted
		pins := map[string]values.Int64{}
		counts := map[string]int64{}
		// seen reconciles the model with an observation of k.
		seen := func(op string, k []byte, v []byte, found bool) {
			want, ok := model[string(k)]
			switch {
			case found && !ok:
				t.Fatalf("%s(%q) = %q, a key never put or deleted", op, k, v)
			case found && string(v) != want:
				t.Fatalf("%s(%q) = %q, want %q", op, k, v, want)
			case !found:
				delete(model, string(k)) // evicted
			}
		}
		for len(ops) >= 3 {
			op, k, n := ops[0]%9, []byte{'k', ops[1] % 64}, int(ops[2])%65
			ops = ops[3:]
			v := bytes.Repeat([]byte{byte(n)}, n)
			switch op {
			case 0, 1:
				if err := m.Put(k, v); err != nil {
					t.Fatalf("Put: %v", err)
				}
				model[string(k)] = string(v)
			case 2:
				if _, err := m.Delete(k); err != nil {
					t.Fatal(err)
				}
				delete(model, string(k))
			case 3:
				err := m.Update(k, func(old []byte, found bool) ([]byte, Op) {
					seen("Update", k, old, found)
					return append(old[:len(old):len(old)], 'u'), OpPut
				})
				switch {
				case err == nil:
					model[string(k)] += "u"
				case errors.Is(err, ErrValueTooLarge):
				default:
					t.Fatalf("Update: %v", err)
				}
			case 4:
				got, err := m.Get(k)
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Fatal(err)
				}
				seen("Get", k, got, err == nil)
			case 5:
				cur, present := model[string(k)]
				swapped, err := m.CompareAndSwap(k, []byte(cur), v)
				if err != nil {
					t.Fatalf("CompareAndSwap: %v", err)
				}
				if swapped {
					if !present {
						t.Fatalf("CompareAndSwap(%q) swapped a key never put", k)
					}
					model[string(k)] = string(v)
				} else {
					delete(model, string(k)) // it can only have been evicted
				}
			case 6:
				stored, err := m.PutIfAbsent(k, v)
				if err != nil {
					t.Fatalf("PutIfAbsent: %v", err)
				}
				if stored {
					model[string(k)] = string(v)
				}
			case 7: // a counter that a handle pins: never evicted
				pk := []byte{'p', byte(n % 4)}
				h, ok := pins[string(pk)]
				if !ok {
					if h, err = m.AcquireInt64(pk); err != nil {
						t.Fatal(err)
					}
					pins[string(pk)] = h
				}
				h.Add(1)
				counts[string(pk)]++
			case 8: // UpdateKeys appends to two keys, inserting those absent
				keys := [][]byte{k, {'k', (k[1] + 1 + byte(n)) % 64}}
				if string(keys[0]) == string(keys[1]) {
					continue
				}
				var want [2]string
				err := m.UpdateKeys(keys, func(vs [][]byte, found []bool) ([][]byte, []Op) {
					out := make([][]byte, 2)
					for i := range 2 {
						seen("UpdateKeys", keys[i], vs[i], found[i])
						out[i] = append(bytes.Clone(vs[i]), 'x')
						if !found[i] {
							out[i] = v
						}
						want[i] = string(out[i])
					}
					return out, []Op{OpPut, OpPut}
				})
				switch {
				case err == nil:
					model[string(keys[0])], model[string(keys[1])] = want[0], want[1]
				case errors.Is(err, ErrValueTooLarge):
				default:
					t.Fatalf("UpdateKeys: %v", err)
				}
			}
			for pk, c := range counts {
				got, err := m.Get([]byte(pk))
				if err != nil || len(got) != 8 || int64(binary.LittleEndian.Uint64(got)) != c {
					t.Fatalf("pinned %q = %x, %v; want %d", pk, got, err, c)
				}
			}
		}
		for k := range model {
			got, err := m.Get([]byte(k))
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			seen("Get", []byte(k), got, err == nil)
		}
		if st := m.Stats(); st.Len > st.EvictBound {
			t.Fatalf("Len %d, bound %d", st.Len, st.EvictBound)
		}
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// UpdateKeys makes room in a map that evicts as Put does: inserts into a
// full map and values that grow past the room left succeed, and never
// evict the keys the transaction read.
func TestEvictUpdateKeys(t *testing.T) {
	m := fullUngrowable(t)
	// Two new keys into the full map, and the two oldest keys (next to
	// go) grown to 1000 bytes each, in one transaction.
	keys := [][]byte{key(0), key(1), key(1000), key(1001)}
	err := m.UpdateKeys(keys, func(vs [][]byte, found []bool) ([][]byte, []Op) {
		if !found[0] || !found[1] || found[2] || found[3] {
			t.Fatalf("found %v", found)
		}
		big := bytes.Repeat([]byte{7}, 1000)
		return [][]byte{big, big, []byte("a"), []byte("b")}, []Op{OpPut, OpPut, OpPut, OpPut}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		v, err := m.Get(k)
		if err != nil || len(v) != []int{1000, 1000, 1, 1}[i] {
			t.Fatalf("%s: %d bytes, %v", k, len(v), err)
		}
	}
	if st := m.Stats(); st.Len > 100 || st.Evictions == 0 || st.FileSize != st.StartFileSize {
		t.Fatalf("Len %d, %d evictions, file %d from %d", st.Len, st.Evictions, st.FileSize, st.StartFileSize)
	}
}

// An UpdateKeys that finds no room in one segment makes room there, and
// only there: another segment of the transaction loses nothing.
func TestEvictUpdateKeysRoomWhereFull(t *testing.T) {
	opts := Options{Entries: 100, AverageKeySize: 16, AverageValueSize: 100, MaxValueSize: 1000, Segments: 2, Evict: true}
	probe := openTest(t, opts)
	opts.MaxFileSize = probe.Stats().StartFileSize // no growth
	m := openTest(t, opts)
	var a, b [][]byte
	for i := 0; len(a) < 200 || len(b) < 200; i++ {
		if k := key(i); m.hash(k).seg == 0 {
			a = append(a, k)
		} else {
			b = append(b, k)
		}
	}
	for i := range 20 {
		mustPut(t, m, b[i], []byte("small"))
	}
	// Segment A's entry space full to the last chunk, with fewer entries
	// than its bound: a delete there needs a chunk for its record.
	sa := m.segmentOf(a[0])
	next := 0
	for sa.hdr.usedChunks.Load()+32 <= m.hdr.ChunksPerSegment {
		mustPut(t, m, a[next], make([]byte, 1000))
		next++
	}
	for sa.hdr.usedChunks.Load() < m.hdr.ChunksPerSegment {
		mustPut(t, m, a[next], make([]byte, 8))
		next++
	}
	err := m.UpdateKeys([][]byte{a[0], b[100]}, func(vs [][]byte, found []bool) ([][]byte, []Op) {
		return [][]byte{nil, []byte("x")}, []Op{OpDelete, OpPut}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := m.segmentOf(b[0]).hdr.count.Load(); n != 21 {
		t.Fatalf("segment B holds %d entries, want its 20 and the new one", n)
	}
	mustMiss(t, m, a[0])
	mustGet(t, m, b[100], "x")
}

// An UpdateKeys that would pass a segment's bound, where every entry is
// one it read and must spare, fails with ErrFull and changes nothing.
func TestEvictUpdateKeysBound(t *testing.T) {
	m := openTest(t, Options{Entries: 8, Segments: 1, Evict: true})
	var keys [][]byte
	for i := range 8 {
		mustPut(t, m, key(i), val(i))
		keys = append(keys, key(i))
	}
	keys = append(keys, key(100))
	err := m.UpdateKeys(keys, func(vs [][]byte, found []bool) ([][]byte, []Op) {
		news, ops := make([][]byte, len(vs)), make([]Op, len(vs))
		news[8], ops[8] = []byte("new"), OpPut
		return news, ops
	})
	if !errors.Is(err, ErrFull) {
		t.Fatalf("UpdateKeys: %v, want ErrFull", err)
	}
	if st := m.Stats(); st.Len != 8 || st.Evictions != 0 {
		t.Fatalf("Len %d, %d evictions", st.Len, st.Evictions)
	}
	mustMiss(t, m, key(100))
}

// Readers that raise every count as fast as eviction lowers it do not
// make a Put fail: after its rounds, eviction takes the next entry that
// may go.
func TestEvictHotSegment(t *testing.T) {
	m := openTest(t, Options{Entries: 8, Segments: 1, Evict: true})
	for i := range 8 {
		mustPut(t, m, key(i), val(i))
		mustGet(t, m, key(i), string(val(i)))
		mustGet(t, m, key(i), string(val(i)))
	}
	s := m.segmentOf(key(0))
	crashPoint = func(step string) {
		if step == "evict.pushed" { // every entry read again, by "readers"
			for i := range s.slots {
				if w := s.slots[i].Load(); w != 0 {
					s.slots[i].Store(w | slotFreqMask)
				}
			}
		}
	}
	defer func() { crashPoint = nil }()
	mustPut(t, m, key(100), val(100))
	if st := m.Stats(); st.Len != 8 || st.Evictions != 1 {
		t.Fatalf("Len %d, %d evictions", st.Len, st.Evictions)
	}
}

// A header whose eviction area would wrap past 2^64 is corrupt.
func TestEvictOffWraps(t *testing.T) {
	h, err := plan(Options{Entries: 100, Evict: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.EvictOff = -uint64(evictAreaBytes(int(h.EvictCap)))
	img := make([]byte, h.FileSize)
	copy(img, h.encode()) // a valid checksum over the hostile header
	if _, err := openMemory(img, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open: %v, want ErrCorrupt", err)
	}
}
