package offmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
)

// The shared cache under pressure from several processes: writers put
// ten times the map's bound of distinct keys, of 8 B to 4 KiB, and read
// back their own and each other's; a watcher process checks the bounds
// all along. A value names its key and version and is filled with a byte
// derived from them, so a stale or torn value is caught by any reader.

var sharedCache = Options{Entries: 2000, AverageKeySize: 16, AverageValueSize: 1024, MaxValueSize: 4096, Segments: 8,
	Evict: true, MaxFileSize: 4 << 20, LockTimeout: 20 * time.Second}

const cacheKeysPerWriter = 5000

func cacheKey(id, i int) []byte { return fmt.Appendf(nil, "w%03d-%06d", id, i) }

func cacheMix(id, i, round int) uint64 {
	return mixSeed(uint64(id)<<40|uint64(i)<<8|uint64(round), 0x9e3779b97f4a7c15)
}

func cacheValue(id, i, round int) []byte {
	x := cacheMix(id, i, round)
	v := make([]byte, 8+int(x%4089))
	binary.LittleEndian.PutUint64(v, uint64(id)<<40|uint64(i)<<8|uint64(round))
	for j := 8; j < len(v); j++ {
		v[j] = byte(x >> 16)
	}
	return v
}

// checkCacheValue reports what is wrong with v as key (id, i)'s value:
// another key's, a version no one put, or torn.
func checkCacheValue(v []byte, id, i int, round func(int) bool) error {
	if len(v) < 8 {
		return fmt.Errorf("key %d/%d: %d bytes", id, i, len(v))
	}
	h := binary.LittleEndian.Uint64(v)
	r := int(h & 0xff)
	if int(h>>40) != id || int(h>>8&(1<<32-1)) != i || !round(r) {
		return fmt.Errorf("key %d/%d: a value of key %d/%d version %d", id, i, h>>40, h>>8&(1<<32-1), r)
	}
	if want := cacheValue(id, i, r); string(v) != string(want) {
		return fmt.Errorf("key %d/%d version %d: %d bytes, torn or of another size (want %d)", id, i, r, len(v), len(want))
	}
	return nil
}

func init() {
	children["cache-writer"] = func() error {
		id, _ := strconv.Atoi(os.Getenv("ID"))
		writers, _ := strconv.Atoi(os.Getenv("WRITERS"))
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		rng := rand.New(rand.NewPCG(uint64(id), 3))
		last := make([]int, cacheKeysPerWriter)
		put := func(i, round int) error {
			last[i] = round
			if err := m.Put(cacheKey(id, i), cacheValue(id, i, round)); err != nil {
				return fmt.Errorf("put %d/%d: %w", id, i, err)
			}
			return nil
		}
		for i := range cacheKeysPerWriter {
			if err := put(i, 1); err != nil {
				return err
			}
			if i >= 50 && i%5 == 0 {
				if err := put(i-50, 2); err != nil { // a newer version of an older key
					return err
				}
			}
			// One of its own recent keys: the last version put, or gone.
			j := max(0, i-rng.IntN(100))
			if v, err := m.Get(cacheKey(id, j)); err == nil {
				if err := checkCacheValue(v, id, j, func(r int) bool { return r == last[j] }); err != nil {
					return err
				}
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			// Any writer's key: some version put, or gone.
			o, k := rng.IntN(writers), rng.IntN(cacheKeysPerWriter)
			if v, err := m.Get(cacheKey(o, k)); err == nil {
				if err := checkCacheValue(v, o, k, func(r int) bool { return r == 1 || r == 2 }); err != nil {
					return err
				}
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		return nil
	}
	children["cache-watcher"] = func() error {
		path := os.Getenv("MAP")
		m, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer m.Close()
		st := m.Stats()
		bound, maxSize := st.EvictBound, st.MaxFileSize
		var looks, biggest int64
		for {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			if fi.Size() > maxSize {
				return fmt.Errorf("the file is %d bytes, its bound %d", fi.Size(), maxSize)
			}
			if n := m.Len(); n > bound {
				return fmt.Errorf("%d entries, the bound is %d", n, bound)
			}
			biggest = max(biggest, fi.Size())
			looks++
			if _, err := os.Stat(os.Getenv("STOP")); err == nil {
				fmt.Printf("looks=%d biggest=%d\n", looks, biggest)
				return nil
			}
		}
	}
}

func TestSharedCacheBound(t *testing.T) { testSharedCache(t, 0) }

// The same with writers killed at random instants and replaced.
func TestSharedCacheKilled(t *testing.T) {
	kills := 12
	if testing.Short() {
		kills = 6
	}
	testSharedCache(t, kills)
}

func testSharedCache(t *testing.T, kills int) {
	const writers = 4
	dir := t.TempDir()
	p := filepath.Join(dir, "cache.map")
	m, err := Open(p, sharedCache)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := writers + kills
	start := func(role string, env ...string) *exec.Cmd {
		cmd := child(t, role, append([]string{"MAP=" + p}, env...)...)
		cmd.Stderr = os.Stderr
		return cmd
	}
	stop := filepath.Join(dir, "stop")
	watcher := start("cache-watcher", "STOP="+stop)
	watcher.Stderr = nil
	var out strings.Builder
	watcher.Stdout, watcher.Stderr = &out, &out
	if err := watcher.Start(); err != nil {
		t.Fatal(err)
	}
	writer := func(id int) *exec.Cmd {
		cmd := start("cache-writer", "ID="+strconv.Itoa(id), "WRITERS="+strconv.Itoa(ids))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	running := make([]*exec.Cmd, writers)
	for i := range running {
		running[i] = writer(i)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	landed := 0
	for k := range kills {
		time.Sleep(time.Duration(2+rng.IntN(30)) * time.Millisecond)
		v := rng.IntN(writers)
		reexec.Kill(running[v].Process)
		switch err := running[v].Wait(); {
		case reexec.Killed(err):
			landed++
		case err != nil:
			t.Fatalf("writer failed before it was killed: %v", err)
		}
		running[v] = writer(writers + k)
	}
	if kills > 0 && landed == 0 {
		t.Fatalf("none of %d kills found its writer still running", kills)
	}
	for _, cmd := range running {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Wait(); err != nil {
		t.Fatalf("watcher: %v: %s", err, out.String())
	}
	t.Logf("watcher: %s", strings.TrimSpace(out.String()))
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if st.Len > st.EvictBound || st.FileSize > st.MaxFileSize || st.Evictions == 0 {
		t.Fatalf("Len %d (bound %d), file %d (bound %d), %d evictions", st.Len, st.EvictBound, st.FileSize, st.MaxFileSize, st.Evictions)
	}
	n := 0
	err = m.Range(func(k, v []byte) bool {
		var id, i int
		if _, err := fmt.Sscanf(string(k), "w%03d-%06d", &id, &i); err != nil {
			t.Errorf("key %q", k)
			return false
		}
		if err := checkCacheValue(v, id, i, func(r int) bool { return r == 1 || r == 2 }); err != nil {
			t.Error(err)
			return false
		}
		n++
		return true
	})
	if err != nil || n != st.Len {
		t.Fatalf("Range: %d entries of %d, %v", n, st.Len, err)
	}
	t.Logf("%d kills landed; %d entries, %d evictions (%d bytes), %d hits, %d misses, file %d bytes", landed, st.Len, st.Evictions, st.EvictedBytes, st.Hits, st.Misses, st.FileSize)
}
