package offmap

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// Eviction's costs, A against B in one run (docs/BENCHMARKS.md): Get on
// 1M entries in a map that evicts and in one that does not, made alike
// (1.2M entries, 512 segments: the bound is not reached, so every key is
// found); and Put of new keys into free room against Put into a full map
// that evicts an entry for each.

var evictBench struct {
	once     sync.Once
	off, on  *Map
	fullOnce sync.Once
	full     *Map
	next     int
}

func evictBenchOptions(evict bool) Options {
	return Options{Entries: 1_200_000, Segments: 512, AverageKeySize: 16, AverageValueSize: 8, Evict: evict}
}

func evictBenchMaps(b *testing.B) (off, on *Map) {
	benchMap(b)
	evictBench.once.Do(func() {
		for _, evict := range []bool{false, true} {
			m, err := Open(filepath.Join(bench.dir, "evict-"+strconv.FormatBool(evict)+".map"), evictBenchOptions(evict))
			if err != nil {
				b.Fatal(err)
			}
			var v [8]byte
			for _, k := range bench.keys {
				binary.LittleEndian.PutUint64(v[:], keyNumber(k))
				if err := m.Put(k, v[:]); err != nil {
					b.Fatal(err)
				}
			}
			if st := m.Stats(); st.Evictions != 0 || st.Len != benchEntries {
				b.Fatalf("%d evictions building the map, %d entries", st.Evictions, st.Len)
			}
			if evict {
				evictBench.on = m
			} else {
				evictBench.off = m
			}
		}
	})
	return evictBench.off, evictBench.on
}

func BenchmarkEvictOffGet(b *testing.B) { off, _ := evictBenchMaps(b); benchGetChecked(b, off) }
func BenchmarkEvictOnGet(b *testing.B)  { _, on := evictBenchMaps(b); benchGetChecked(b, on) }

func benchGetChecked(b *testing.B, m *Map) {
	b.ReportAllocs()
	b.ResetTimer()
	if err := getLoop(m, bench.keys, b.N); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEvictOffPut inserts new keys into a map with room for them.
func BenchmarkEvictOffPut(b *testing.B) {
	opts := evictBenchOptions(false)
	opts.Entries = benchEntries
	benchInsert(b, opts)
}

// BenchmarkEvictOnPut inserts new keys into a map that evicts, full:
// every Put evicts an entry.
func BenchmarkEvictOnPut(b *testing.B) {
	evictBench.fullOnce.Do(func() {
		opts := evictBenchOptions(true)
		opts.Entries = benchEntries
		m, err := Open(filepath.Join(b.TempDir(), "full.map"), opts)
		if err != nil {
			b.Fatal(err)
		}
		evictBench.full = m
		var v [8]byte
		for i := range 2 * benchEntries { // every segment at its bound
			if err := m.Put(benchKey(i), v[:]); err != nil {
				b.Fatal(err)
			}
		}
		evictBench.next = 2 * benchEntries
	})
	m := evictBench.full
	keys := make([][]byte, 1<<16)
	var v [8]byte
	before := m.Stats().Evictions
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(keys) == 0 {
			b.StopTimer()
			for j := range keys {
				keys[j] = benchKey(evictBench.next + j)
			}
			evictBench.next += len(keys)
			b.StartTimer()
		}
		if err := m.Put(keys[i%len(keys)], v[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(m.Stats().Evictions-before)/float64(b.N), "evictions/op")
}

// Hot paths allocate nothing where the map evicts either.
func TestEvictAllocs(t *testing.T) {
	m := openTest(t, Options{Entries: 1000, AverageKeySize: 16, AverageValueSize: 8, Evict: true})
	keys := make([][]byte, 4000)
	for i := range keys {
		keys[i] = benchKey(i)
	}
	v := make([]byte, 8)
	buf := make([]byte, 0, 8)
	i := 0
	if n := testing.AllocsPerRun(2000, func() {
		if err := m.Put(keys[i%len(keys)], v); err != nil {
			t.Fatal(err)
		}
		var err error
		if buf, err = m.AppendValue(buf[:0], keys[(i*7)%len(keys)]); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		i++
	}); n != 0 {
		t.Fatalf("%v allocations per evicting Put and Get", n)
	}
	if m.Stats().Evictions == 0 {
		t.Fatal("no evictions")
	}
}
