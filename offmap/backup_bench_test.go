package offmap

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBackupStall measures what a writer feels while the map is
// backed up: one goroutine Puts (same-size overwrites of random keys) for
// a second with no backup, then while BackupTo runs; it reports the
// longest Put and the 99.9th percentile of Put latency in each phase.
// The map holds about OFFMAP_BENCH_BACKUP_MB MiB of entries (64 by
// default; docs/BENCHMARKS.md uses 1024). Run it with -benchtime=1x.
func BenchmarkBackupStall(b *testing.B) {
	mb := 64
	if v, err := strconv.Atoi(os.Getenv("OFFMAP_BENCH_BACKUP_MB")); err == nil && v > 0 {
		mb = v
	}
	const keyLen, valLen = 16, 100
	n := mb << 20 / 128 // an entry takes 128 bytes: header, key, value
	dir := b.TempDir()
	m, err := Open(filepath.Join(dir, "big.map"), Options{Entries: n, AverageKeySize: keyLen, AverageValueSize: valLen})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	key := func(dst []byte, i int) []byte { return fmt.Appendf(dst[:0], "key-%012d", i) }
	val := make([]byte, valLen)
	var kb []byte
	for i := range n {
		kb = key(kb, i)
		if err := m.Put(kb, val); err != nil {
			b.Fatal(err)
		}
	}
	st := m.Stats()
	b.Logf("map: %d entries, file %d MiB", m.Len(), st.FileSize>>20)

	// put runs Puts until stop is set, recording each one's latency.
	put := func(stop *atomic.Bool, lat *[]time.Duration) {
		r := rand.New(rand.NewPCG(1, 2))
		var kb []byte
		v := make([]byte, valLen)
		for !stop.Load() {
			kb = key(kb, r.IntN(n))
			t0 := time.Now()
			if err := m.Put(kb, v); err != nil {
				panic(err)
			}
			*lat = append(*lat, time.Since(t0))
		}
	}
	phase := func(during func()) []time.Duration {
		lat := make([]time.Duration, 0, 1<<22)
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); put(&stop, &lat) }()
		during()
		stop.Store(true)
		wg.Wait()
		return lat
	}
	var stalls, during999, base999, baseMax, held, backups []time.Duration
	for i := 0; i < b.N; i++ {
		base := phase(func() { time.Sleep(time.Second) })
		var info BackupInfo
		var took time.Duration
		during := phase(func() {
			time.Sleep(50 * time.Millisecond) // the writer is under way
			dest := filepath.Join(dir, fmt.Sprintf("backup-%d.map", i))
			t0 := time.Now()
			var err error
			if info, err = m.BackupTo(dest); err != nil {
				panic(err)
			}
			took = time.Since(t0)
			os.Remove(dest)
		})
		bMax, bP := maxP999(base)
		dMax, dP := maxP999(during)
		b.Logf("backup of %d entries: %v in all, locks held %v, copy %d MiB", info.Entries, took.Round(time.Millisecond), info.Stall.Round(time.Millisecond), info.FileSize>>20)
		b.Logf("Puts without backup: %d, p99.9 %v, max %v; during: %d, p99.9 %v, max %v", len(base), bP, bMax, len(during), dP, dMax)
		stalls, during999, base999 = append(stalls, dMax), append(during999, dP), append(base999, bP)
		baseMax, held, backups = append(baseMax, bMax), append(held, info.Stall), append(backups, took)
	}
	// The medians of the runs (-benchtime=Nx makes N runs on one map).
	b.ReportMetric(float64(median(stalls).Microseconds()), "max-stall-us")
	b.ReportMetric(float64(median(during999).Microseconds()), "p999-during-us")
	b.ReportMetric(float64(median(base999).Microseconds()), "p999-without-us")
	b.ReportMetric(float64(median(baseMax).Microseconds()), "max-without-us")
	b.ReportMetric(float64(median(held).Milliseconds()), "locks-held-ms")
	b.ReportMetric(float64(median(backups).Milliseconds()), "backup-ms")
}

func maxP999(lat []time.Duration) (maxLat, p999 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[len(lat)-1], lat[len(lat)*999/1000]
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
