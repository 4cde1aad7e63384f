package offmap_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/offmap"
)

// tempMap returns a path for a new map file and a function that removes
// it.
func tempMap() (string, func()) {
	dir, err := os.MkdirTemp("", "offmap-example")
	if err != nil {
		log.Fatal(err)
	}
	return filepath.Join(dir, "clients.map"), func() { os.RemoveAll(dir) }
}

func Example() {
	path, cleanup := tempMap()
	defer cleanup()

	m, err := offmap.Open(path, offmap.Options{Entries: 10_000, AverageKeySize: 8, AverageValueSize: 16})
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Put([]byte("alice"), []byte("admin")); err != nil {
		log.Fatal(err)
	}
	v, err := m.Get([]byte("alice"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(v))
	if err := m.Close(); err != nil {
		log.Fatal(err)
	}

	// The data is in the file: another process, or this one later, opens
	// it with no sizes at all.
	m, err = offmap.Open(path, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	_, err = m.Get([]byte("bob"))
	fmt.Println(m.Len(), err)
	// Output:
	// admin
	// 1 offmap: key not found
}

// Two goroutines (or two processes) add to one counter through handles
// into the mapped value: no lock, no copy, no Put.
func ExampleMap_AcquireInt64() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hits, err := m.AcquireInt64([]byte("hits"))
			if err != nil {
				log.Fatal(err)
			}
			for range 1000 {
				hits.Add(1)
			}
		}()
	}
	wg.Wait()
	hits, err := m.AcquireInt64([]byte("hits"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(hits.Load())
	// Output: 2000
}

// Update reads and changes an entry in one locked step.
func ExampleMap_Update() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 32})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	appendVisit := func(page string) error {
		return m.Update([]byte("visits"), func(v []byte, found bool) ([]byte, offmap.Op) {
			if found {
				v = append(v, ',')
			}
			return append(v, page...), offmap.OpPut
		})
	}
	for _, p := range []string{"/", "/docs", "/pricing"} {
		if err := appendVisit(p); err != nil {
			log.Fatal(err)
		}
	}
	v, err := m.Get([]byte("visits"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(v))
	// Output: /,/docs,/pricing
}

// Conditional updates are one locked step each, in every process: here a
// lease that only its holder may renew or give up.
func ExampleMap_CompareAndSwap() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 16})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	lease := []byte("leader")
	took, err := m.PutIfAbsent(lease, []byte("node-a"))
	fmt.Println("node-a takes the lease:", took, err)
	took, err = m.PutIfAbsent(lease, []byte("node-b"))
	fmt.Println("node-b takes the lease:", took, err)

	moved, err := m.CompareAndSwap(lease, []byte("node-b"), []byte("node-c"))
	fmt.Println("node-b hands it on:", moved, err)
	moved, err = m.CompareAndSwap(lease, []byte("node-a"), []byte("node-c"))
	fmt.Println("node-a hands it on:", moved, err)

	gone, err := m.CompareAndDelete(lease, []byte("node-a"))
	fmt.Println("node-a gives it up:", gone, err)
	gone, err = m.CompareAndDelete(lease, []byte("node-c"))
	fmt.Println("node-c gives it up:", gone, err)
	// Output:
	// node-a takes the lease: true <nil>
	// node-b takes the lease: false <nil>
	// node-b hands it on: false <nil>
	// node-a hands it on: true <nil>
	// node-a gives it up: false <nil>
	// node-c gives it up: true <nil>
}

// A set keeps keys only: here, the request ids a fleet of processes has
// already handled, so that a retried request is done once.
func ExampleSet() {
	path, cleanup := tempMap()
	defer cleanup()
	seen, err := offmap.OpenSet(path, offmap.Options{Entries: 10_000, AverageKeySize: 16})
	if err != nil {
		log.Fatal(err)
	}
	defer seen.Close()
	for _, id := range []string{"req-1", "req-2", "req-1"} {
		first, err := seen.Add([]byte(id))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id, "first time:", first)
	}
	fmt.Println(seen.Len(), "ids")
	// Output:
	// req-1 first time: true
	// req-2 first time: true
	// req-1 first time: false
	// 2 ids
}

// ClientStats is laid over a value in the file: its atomic fields are
// shared by every process that acquires the key.
type ClientStats struct {
	Requests, Bytes atomic.Int64
	ByStatus        [6]atomic.Uint32 // 1xx .. 5xx
}

// A value of several counters, updated in place by any process (Chronicle
// Map issue 56: two counters in one value), with no copy and no Put.
func ExampleAcquire() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 1000, AverageKeySize: 16, AverageValueSize: 48})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	st, err := offmap.Acquire[ClientStats](m, []byte("client-42"))
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range []struct{ status, size int }{{200, 512}, {404, 64}, {200, 2048}} {
		st.Requests.Add(1)
		st.Bytes.Add(int64(r.size))
		st.ByStatus[r.status/100].Add(1)
	}
	fmt.Println(st.Requests.Load(), st.Bytes.Load(), st.ByStatus[2].Load(), st.ByStatus[4].Load())
	// Output: 3 2624 2 1
}

// Several keys in one step: a transfer between two accounts, which may
// live in different segments. ViewKeys reads both at one instant, so the
// total it sees is always right, even while transfers run in other
// goroutines or processes.
func ExampleMap_UpdateKeys() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cents := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	alice, bob := []byte("alice"), []byte("bob")
	if err := m.Put(alice, cents(500)); err != nil {
		log.Fatal(err)
	}
	if err := m.Put(bob, cents(100)); err != nil {
		log.Fatal(err)
	}

	err = m.UpdateKeys([][]byte{alice, bob}, func(v [][]byte, found []bool) ([][]byte, []offmap.Op) {
		a, b := binary.LittleEndian.Uint64(v[0]), binary.LittleEndian.Uint64(v[1])
		if a < 200 {
			return nil, []offmap.Op{offmap.OpNone, offmap.OpNone} // not enough: change nothing
		}
		return [][]byte{cents(a - 200), cents(b + 200)}, []offmap.Op{offmap.OpPut, offmap.OpPut}
	})
	if err != nil {
		log.Fatal(err)
	}
	err = m.ViewKeys([][]byte{alice, bob}, func(v [][]byte, found []bool) {
		a, b := binary.LittleEndian.Uint64(v[0]), binary.LittleEndian.Uint64(v[1])
		fmt.Println(a, b, a+b)
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: 300 300 600
}

// Entries that expire: a map created with Options.Expiring (or a TTL for
// every entry) takes a time to live per Put. An expired entry is never
// returned; Sweep, from any process, reclaims its space.
func ExampleMap_PutTTL() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8, Expiring: true})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	if err := m.PutTTL([]byte("session"), []byte("token"), time.Hour); err != nil {
		log.Fatal(err)
	}
	// An entry whose time is already past: stored, and never read.
	if err := m.PutExpiring([]byte("stale"), []byte("old"), time.Now().Add(-time.Second)); err != nil {
		log.Fatal(err)
	}
	v, _ := m.Get([]byte("session"))
	_, err = m.Get([]byte("stale"))
	fmt.Println(string(v), errors.Is(err, offmap.ErrNotFound))
	n, err := m.Sweep()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("swept", n, "left", m.Len())
	// Output:
	// token true
	// swept 1 left 1
}

// A cache shared by every process on the host: the map holds at most
// Entries entries (and its file at most MaxFileSize bytes), and a Put
// that needs room evicts entries unlikely to be read again. Here a hot
// key, read on each pass, survives a stream of keys read once.
func ExampleOptions_evict() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 1000, Segments: 1, AverageKeySize: 8, AverageValueSize: 8, Evict: true})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	if err := m.Put([]byte("hot"), []byte("often")); err != nil {
		log.Fatal(err)
	}
	for i := range 100_000 {
		if i%100 == 0 {
			if _, err := m.Get([]byte("hot")); err != nil {
				log.Fatal(err)
			}
		}
		if err := m.Put(fmt.Appendf(nil, "once-%d", i), []byte("x")); err != nil {
			log.Fatal(err) // never ErrFull
		}
	}
	v, err := m.Get([]byte("hot"))
	st := m.Stats()
	fmt.Println(string(v), err, st.Len, st.Evictions)
	// Output:
	// often <nil> 1000 99001
}

// Entry checksums: chosen when the file is created, kept by every write.
// After a power cut, Check reports entries whose bytes do not match their
// checksum (a write the disk tore) and Recover drops them, so a reader
// never gets half of a value.
func ExampleOptions_checksumEntries() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 32, ChecksumEntries: true})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if err := m.Put([]byte("order-1"), []byte(`{"qty":5,"px":101.25}`)); err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Stats().ChecksumEntries, m.Check())
	// Output: true <nil>
}

// A large map checked a segment at a time, as offmap verify does to show
// its progress: CheckFile and every CheckSegment together are Check.
func ExampleMap_CheckSegment() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for i := range 1000 {
		if err := m.Put(fmt.Appendf(nil, "client-%d", i), []byte("ok")); err != nil {
			log.Fatal(err)
		}
	}

	problems, err := m.CheckFile()
	if err != nil {
		log.Fatal(err)
	}
	n := m.Stats().Segments
	for i := range n {
		p, err := m.CheckSegment(i)
		if err != nil {
			log.Fatal(err)
		}
		problems = append(problems, p...)
		if (i+1)%(n/4) == 0 {
			fmt.Printf("%d of %d segments checked\n", i+1, n)
		}
	}
	fmt.Println(len(problems), "problems")
	// Output:
	// 4 of 16 segments checked
	// 8 of 16 segments checked
	// 12 of 16 segments checked
	// 16 of 16 segments checked
	// 0 problems
}

// AllErr is a pass over every entry as a for-range loop, with an error to
// check afterwards, as after a bufio.Scanner's loop: a damaged segment or
// Close stops the loop early. Entries come in the map's order, not the
// keys'.
func ExampleMap_AllErr() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for _, name := range []string{"carol", "alice", "bob"} {
		if err := m.Put([]byte(name), []byte("on")); err != nil {
			log.Fatal(err)
		}
	}

	var names []string
	for k := range m.AllErr(&err) {
		names = append(names, string(k)) // k is valid until the next step: copy it
	}
	if err != nil { // a damaged segment (ErrCorrupt), or the map closed
		log.Fatal(err)
	}
	slices.Sort(names)
	fmt.Println(names)
	// Output: [alice bob carol]
}

// Range calls a function for every entry, with no lock held: the function
// may use the map, here to delete what it visits.
func ExampleMap_Range() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for i := range 10 {
		if err := m.Put(fmt.Appendf(nil, "session-%d", i), []byte("expired")); err != nil {
			log.Fatal(err)
		}
	}

	n := 0
	err = m.Range(func(k, v []byte) bool {
		if _, err := m.Delete(k); err != nil {
			log.Fatal(err)
		}
		n++
		return true // false stops the pass
	})
	fmt.Println(n, "deleted,", m.Len(), "left,", err)
	// Output: 10 deleted, 0 left, <nil>
}

// Recover repairs a damaged map in place, while other processes may use
// it. Here a power cut's torn write is played by changing a byte of a
// value behind the map's back: with ChecksumEntries, reads refuse the
// entry, Check reports it, and Recover drops it and nothing else.
func ExampleMap_Recover() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{ChecksumEntries: true})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if err := m.Put([]byte("alice"), []byte("balance=100")); err != nil {
		log.Fatal(err)
	}
	if err := m.Put([]byte("bob"), []byte("balance=7")); err != nil {
		log.Fatal(err)
	}

	damage(path, []byte("balance=100"))
	_, err = m.Get([]byte("alice"))
	fmt.Println("get:", errors.Is(err, offmap.ErrCorrupt))
	fmt.Println("check:", errors.Is(m.Check(), offmap.ErrCorrupt))

	fixed, err := m.Recover()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("recover fixed something:", len(fixed) > 0)
	_, err = m.Get([]byte("alice"))
	v, _ := m.Get([]byte("bob"))
	fmt.Println(err, string(v), m.Check())
	// Output:
	// get: true
	// check: true
	// recover fixed something: true
	// offmap: key not found balance=7 <nil>
}

// damage changes the first byte of what in the file at path.
func damage(path string, what []byte) {
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	at := bytes.Index(b, what)
	if at < 0 {
		log.Fatal("not in the file")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{what[0] ^ 0xff}, int64(at)); err != nil {
		log.Fatal(err)
	}
}

// GetMany looks up a batch of keys, overlapping their cache misses: on a
// large map several times the throughput of one Get after another.
func ExampleMap_GetMany() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	m.Put([]byte("alice"), []byte("admin"))
	m.Put([]byte("carol"), []byte("viewer"))

	keys := [][]byte{[]byte("alice"), []byte("bob"), []byte("carol")}
	err = m.GetMany(keys, func(i int, value []byte, found bool) {
		fmt.Printf("%s: %q %v\n", keys[i], value, found)
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// alice: "admin" true
	// bob: "" false
	// carol: "viewer" true
}

// A backup streamed to a writer (here a gzip stream into a file), and its
// restore: the unpacked bytes are a map file that Open uses as it is.
func ExampleMap_Backup() {
	path, cleanup := tempMap()
	defer cleanup()
	m, err := offmap.Open(path, offmap.Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for _, c := range []string{"alice", "bob", "carol"} {
		if err := m.Put([]byte(c), []byte("active")); err != nil {
			log.Fatal(err)
		}
	}

	gz := path + ".gz"
	f, err := os.Create(gz)
	if err != nil {
		log.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	info, err := m.Backup(zw) // other processes may go on writing meanwhile
	if err != nil {
		log.Fatal(err)
	}
	if err := errors.Join(zw.Close(), f.Close()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("backed up", info.Entries, "entries")

	// Restore into a new file.
	f, err = os.Open(gz)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		log.Fatal(err)
	}
	restored := path + ".restored"
	out, err := os.Create(restored)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		log.Fatal(err)
	}
	if err := out.Close(); err != nil {
		log.Fatal(err)
	}
	r, err := offmap.Open(restored, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	v, err := r.Get([]byte("bob"))
	fmt.Println(r.Len(), string(v), err, r.Check())
	// Output:
	// backed up 3 entries
	// 3 active <nil> <nil>
}
