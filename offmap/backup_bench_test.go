package offmap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBackupStall measures what a writer feels while the map is
// backed up: another process Puts (same-size overwrites of random keys)
// for a second with no backup, then while BackupTo runs; the benchmark
// reports the longest Put and the 99.9th percentile of Put latency in
// each phase, the medians over the runs (-benchtime=Nx).
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

	// A writer in another process, as in production: it Puts until its
	// stdin closes, then writes each Put's start time and latency.
	var stalls, during999, base999, baseMax, held, backups []time.Duration
	for i := 0; i < b.N; i++ {
		w := child(b, "stall-writer", "MAP="+m.Path(), "N="+strconv.Itoa(n))
		in, err := w.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := w.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		w.Stderr = os.Stderr
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(out)
		if line, err := r.ReadString('\n'); err != nil || line != "writing\n" {
			b.Fatalf("writer: %q %v", line, err)
		}
		time.Sleep(5 * time.Second) // without a backup: the last second counts
		dest := filepath.Join(dir, fmt.Sprintf("backup-%d.map", i))
		var firstLock atomic.Int64
		crashPoint = func(s string) {
			if s == "backup.locking" {
				firstLock.Store(time.Now().UnixNano())
			}
		}
		t0 := time.Now()
		info, err := m.BackupTo(dest)
		crashPoint = nil
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		time.Sleep(100 * time.Millisecond)
		in.Close()
		data, err := io.ReadAll(r)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Wait(); err != nil {
			b.Fatal(err)
		}
		os.Remove(dest)
		// Puts that overlapped the time the backup held segment locks,
		// and those during the rest of it (taking memory, writing the new
		// file).
		lockFrom, lockTo := firstLock.Load(), firstLock.Load()+int64(info.Stall)
		var baseLat, during, locked []time.Duration
		for j := 0; j+16 <= len(data); j += 16 {
			start := int64(binary.LittleEndian.Uint64(data[j:]))
			lat := time.Duration(binary.LittleEndian.Uint64(data[j+8:]))
			switch {
			case start < lockTo && start+int64(lat) > lockFrom:
				locked = append(locked, lat) // it overlapped the locks
			case start >= t0.UnixNano() && start < t0.Add(took).UnixNano():
				during = append(during, lat)
			case start < t0.UnixNano() && start >= t0.Add(-time.Second).UnixNano():
				baseLat = append(baseLat, lat)
			}
		}
		bMax, bP := maxP999(baseLat)
		dMax, dP := maxP999(during)
		lMax, lP := maxP999(locked)
		b.Logf("backup of %d entries: %v in all, locks held %v, copy %d MiB", info.Entries, took.Round(time.Millisecond), info.Stall.Round(time.Millisecond), info.FileSize>>20)
		b.Logf("Puts without backup: %d, p99.9 %v, max %v; while locks held: %d, p99.9 %v, max %v; rest of the backup: %d, p99.9 %v, max %v",
			len(baseLat), bP, bMax, len(locked), lP, lMax, len(during), dP, dMax)
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

func init() {
	children["stall-writer"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		var stop atomic.Bool
		go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
		rec := make([]byte, 0, 64<<20)
		r := rand.New(rand.NewPCG(1, 2))
		var kb []byte
		v := make([]byte, 100)
		// Fault the mapping in first, as a process that has run a while has.
		if err := m.Range(func(k, v []byte) bool { return true }); err != nil {
			return err
		}
		fmt.Println("writing")
		for !stop.Load() {
			kb = fmt.Appendf(kb[:0], "key-%012d", r.IntN(n))
			t0 := time.Now()
			if err := m.Put(kb, v); err != nil {
				return err
			}
			rec = binary.LittleEndian.AppendUint64(rec, uint64(t0.UnixNano()))
			rec = binary.LittleEndian.AppendUint64(rec, uint64(time.Since(t0)))
		}
		_, err = os.Stdout.Write(rec)
		return err
	}
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
