package offmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPutGetDelete(t *testing.T) {
	m := openTest(t, small)
	mustMiss(t, m, []byte("a"))
	mustPut(t, m, []byte("a"), []byte("1"))
	mustPut(t, m, []byte("b"), []byte("22"))
	mustPut(t, m, []byte(""), []byte("empty key"))
	mustPut(t, m, []byte("c"), nil)
	mustGet(t, m, []byte("a"), "1")
	mustGet(t, m, []byte("b"), "22")
	mustGet(t, m, []byte(""), "empty key")
	mustGet(t, m, []byte("c"), "")
	if m.Len() != 4 {
		t.Fatalf("Len = %d, want 4", m.Len())
	}
	if ok, _ := m.Has([]byte("b")); !ok {
		t.Fatal("Has(b) = false")
	}
	if ok, _ := m.Has([]byte("zz")); ok {
		t.Fatal("Has(zz) = true")
	}
	if ok, err := m.Delete([]byte("a")); !ok || err != nil {
		t.Fatalf("Delete(a) = %v, %v", ok, err)
	}
	if ok, err := m.Delete([]byte("a")); ok || err != nil {
		t.Fatalf("second Delete(a) = %v, %v", ok, err)
	}
	mustMiss(t, m, []byte("a"))
	mustGet(t, m, []byte("b"), "22")
	if m.Len() != 3 {
		t.Fatalf("Len = %d, want 3", m.Len())
	}
}

// TestAgainstModel runs random operations against a Go map and compares
// every result, with deletes exercising backward-shift deletion and value
// sizes changing so entries are rewritten in place and relocated.
func TestAgainstModel(t *testing.T) {
	m := openTest(t, Options{Entries: 2000, AverageKeySize: 10, AverageValueSize: 20, MaxValueSize: 100, Segments: 2})
	model := map[string]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50000 {
		k := key(rng.IntN(1500))
		switch op := rng.IntN(10); {
		case op < 5:
			v := bytes.Repeat([]byte{byte('a' + i%26)}, rng.IntN(60))
			if err := m.Put(k, v); err != nil {
				t.Fatalf("op %d Put: %v", i, err)
			}
			model[string(k)] = string(v)
		case op < 8:
			ok, err := m.Delete(k)
			_, want := model[string(k)]
			if err != nil || ok != want {
				t.Fatalf("op %d Delete = %v, %v; want %v", i, ok, err, want)
			}
			delete(model, string(k))
		default:
			got, err := m.Get(k)
			want, ok := model[string(k)]
			if ok && (err != nil || string(got) != want) || !ok && !errors.Is(err, ErrNotFound) {
				t.Fatalf("op %d Get = %q, %v; want %q, %v", i, got, err, want, ok)
			}
		}
	}
	if m.Len() != len(model) {
		t.Fatalf("Len = %d, model has %d", m.Len(), len(model))
	}
	seen := map[string]string{}
	if err := m.Range(func(k, v []byte) bool {
		if _, dup := seen[string(k)]; dup {
			t.Fatalf("Range saw %q twice", k)
		}
		seen[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(model) {
		t.Fatalf("Range saw %d entries, model has %d", len(seen), len(model))
	}
	for k, v := range model {
		if seen[k] != v {
			t.Fatalf("Range: %q = %q, want %q", k, seen[k], v)
		}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestValueSizeChanges(t *testing.T) {
	m := openTest(t, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 16, MaxValueSize: 1000})
	k := []byte("grow")
	for _, n := range []int{0, 3, 8, 9, 16, 17, 100, 999, 1000, 40, 7, 0, 500} {
		v := bytes.Repeat([]byte{byte(n)}, n)
		mustPut(t, m, k, v)
		mustGet(t, m, k, string(v))
		if err := m.Check(); err != nil {
			t.Fatalf("after %d-byte value: %v", n, err)
		}
	}
	used := m.Stats().BytesUsed
	if want := int64(entryBytes(4, 500, 0)+7) &^ 7; used != want {
		t.Fatalf("BytesUsed = %d, want %d: shrinking or relocating leaked space", used, want)
	}
}

func TestAppendValueReusesBuffer(t *testing.T) {
	m := openTest(t, small)
	mustPut(t, m, []byte("k"), []byte("hello"))
	buf := make([]byte, 0, 64)
	got, err := m.AppendValue(buf, []byte("k"))
	if err != nil || string(got) != "hello" || &got[0] != &buf[:1][0] {
		t.Fatalf("AppendValue = %q, %v (same buffer: %v)", got, err, len(got) > 0 && &got[0] == &buf[:1][0])
	}
	prefixed, _ := m.AppendValue([]byte("say "), []byte("k"))
	if string(prefixed) != "say hello" {
		t.Fatalf("AppendValue with prefix = %q", prefixed)
	}
	if got, err := m.AppendValue(buf, []byte("missing")); !errors.Is(err, ErrNotFound) || len(got) != 0 {
		t.Fatalf("AppendValue(missing) = %q, %v", got, err)
	}
}

func TestZeroAllocations(t *testing.T) {
	sums := small
	sums.ChecksumEntries = true // reads verify the checksum
	for _, opts := range []Options{small, sums} {
		t.Run(fmt.Sprint("checksums=", opts.ChecksumEntries), func(t *testing.T) { zeroAllocations(t, opts) })
	}
}

func zeroAllocations(t *testing.T, opts Options) {
	m := openTest(t, opts)
	k, v := []byte("counter"), make([]byte, 8)
	mustPut(t, m, k, v)
	k40 := []byte("forty")
	mustPut(t, m, k40, make([]byte, 40))
	buf := make([]byte, 0, 64)
	h, err := m.AcquireInt64([]byte("handle"))
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"AppendValue":    func() { buf, _ = m.AppendValue(buf[:0], k) },
		"AppendValue 40": func() { buf, _ = m.AppendValue(buf[:0], k40) },
		"Put existing":   func() { _ = m.Put(k, v) },
		"Has":            func() { _, _ = m.Has(k) },
		"Int64.Add":      func() { h.Add(1) },
		"Update counter": func() { _ = m.Update(k, incr) },
		"Delete and Put": func() { _, _ = m.Delete(k); _ = m.Put(k, v) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
}

func incr(v []byte, found bool) ([]byte, Op) {
	var n uint64
	if found {
		n = binary.LittleEndian.Uint64(v)
	}
	return binary.LittleEndian.AppendUint64(v[:0], n+1), OpPut
}

func TestUpdate(t *testing.T) {
	m := openTest(t, small)
	k := []byte("n")
	for range 10 {
		if err := m.Update(k, incr); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := m.Get(k)
	if binary.LittleEndian.Uint64(got) != 10 {
		t.Fatalf("after 10 increments: %d", binary.LittleEndian.Uint64(got))
	}
	// OpNone changes nothing, OpDelete deletes, a long value relocates.
	if err := m.Update(k, func([]byte, bool) ([]byte, Op) { return []byte("ignored"), OpNone }); err != nil {
		t.Fatal(err)
	}
	mustGet(t, m, k, string(got))
	long := bytes.Repeat([]byte("x"), 200)
	if err := m.Update(k, func([]byte, bool) ([]byte, Op) { return long, OpPut }); err != nil {
		t.Fatal(err)
	}
	mustGet(t, m, k, string(long))
	if err := m.Update(k, func([]byte, bool) ([]byte, Op) { return nil, OpDelete }); err != nil {
		t.Fatal(err)
	}
	mustMiss(t, m, k)
	if err := m.Update([]byte("absent"), func(_ []byte, found bool) ([]byte, Op) {
		if found {
			t.Error("found = true for an absent key")
		}
		return nil, OpDelete
	}); err != nil {
		t.Fatal(err)
	}
	tooBig := make([]byte, m.Stats().MaxValueSize+1)
	if err := m.Update(k, func([]byte, bool) ([]byte, Op) { return tooBig, OpPut }); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("oversized Update: %v", err)
	}
	mustMiss(t, m, k)
}

func TestUpdatePanicReleasesLock(t *testing.T) {
	m := openTest(t, small)
	mustPut(t, m, []byte("k"), []byte("v"))
	func() {
		defer func() { recover() }()
		m.Update([]byte("k"), func([]byte, bool) ([]byte, Op) { panic("boom") })
	}()
	mustPut(t, m, []byte("k"), []byte("w")) // would wait for the lock forever
	mustGet(t, m, []byte("k"), "w")
}

func TestRangeStopsAndSeesAll(t *testing.T) {
	m := openTest(t, small)
	for i := range 500 {
		mustPut(t, m, key(i), val(i))
	}
	var keys []string
	m.Range(func(k, v []byte) bool {
		if string(v) != string(val(mustAtoi(t, k))) {
			t.Fatalf("Range: %q = %q", k, v)
		}
		keys = append(keys, string(k))
		return true
	})
	slices.Sort(keys)
	if len(keys) != 500 || keys[0] != string(key(0)) || keys[499] != string(key(499)) {
		t.Fatalf("Range saw %d keys", len(keys))
	}
	n := 0
	m.Range(func(k, v []byte) bool { n++; return n < 7 })
	if n != 7 {
		t.Fatalf("Range went on after false: %d calls", n)
	}
	// fn may use the map: no lock is held while it runs.
	m.Range(func(k, v []byte) bool { _, err := m.Delete(k); return err == nil })
	if m.Len() != 0 {
		t.Fatalf("Len = %d after deleting during Range", m.Len())
	}
}

func TestAll(t *testing.T) {
	m := openTest(t, small)
	for i := range 300 {
		mustPut(t, m, key(i), val(i))
	}
	seen := map[string]bool{}
	for k, v := range m.All() {
		if string(v) != string(val(mustAtoi(t, k))) || seen[string(k)] {
			t.Fatalf("All: %q = %q (seen before: %v)", k, v, seen[string(k)])
		}
		seen[string(k)] = true
	}
	if len(seen) != 300 {
		t.Fatalf("All saw %d keys, want 300", len(seen))
	}
	n := 0
	for range m.All() {
		if n++; n == 7 {
			break
		}
	}
	if n != 7 {
		t.Fatalf("All went on after break: %d", n)
	}
}

func mustAtoi(t testing.TB, k []byte) int {
	var i int
	if _, err := fmt.Sscanf(string(k), "key-%d", &i); err != nil {
		t.Fatalf("bad key %q", k)
	}
	return i
}

func TestOversizedKeyAndValue(t *testing.T) {
	m := openTest(t, Options{Entries: 10, AverageKeySize: 4, AverageValueSize: 4, MaxKeySize: 16, MaxValueSize: 32})
	if err := m.Put(make([]byte, 17), nil); !errors.Is(err, ErrKeyTooLarge) {
		t.Fatalf("17-byte key: %v", err)
	}
	if err := m.Put([]byte("k"), make([]byte, 33)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("33-byte value: %v", err)
	}
	mustPut(t, m, make([]byte, 16), make([]byte, 32))
	if _, err := m.AcquireInt64(make([]byte, 17)); !errors.Is(err, ErrKeyTooLarge) {
		t.Fatalf("AcquireInt64 with 17-byte key: %v", err)
	}
	if m.Len() != 1 {
		t.Fatalf("Len = %d", m.Len())
	}
}

// TestFull fills the map until ErrFull and checks that nothing stored is
// damaged, that reads, updates and deletes go on working, and that
// deleted space is reused.
func TestFull(t *testing.T) {
	// A map that may not grow past its starting size.
	opts := Options{Entries: 500, AverageKeySize: 11, AverageValueSize: 8, MaxFileSize: 64 << 10}
	m := openTest(t, opts)
	n := 0
	for ; ; n++ {
		err := m.Put(key(n), val(n)[:8])
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < int(opts.Entries) {
		t.Fatalf("full after %d entries, sized for %d", n, opts.Entries)
	}
	if m.Len() != n {
		t.Fatalf("Len = %d after %d puts", m.Len(), n)
	}
	for i := range n {
		mustGet(t, m, key(i), string(val(i)[:8]))
	}
	// Updates that need no more room still work.
	mustPut(t, m, key(0), []byte("updated!"))
	mustGet(t, m, key(0), "updated!")
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	// Keep inserting new keys: each ErrFull changes nothing; each delete
	// makes room for one more.
	stored := map[int]bool{}
	for i := range n {
		stored[i] = true
	}
	fails := 0
	for i := n; i < n+200; i++ {
		err := m.Put(key(i), val(i)[:8])
		if errors.Is(err, ErrFull) {
			fails++
			mustMiss(t, m, key(i))
			// Free one entry of the same segment: the new key fits then.
			for j := range stored {
				if m.segmentOf(key(j)).idx == m.segmentOf(key(i)).idx {
					if ok, _ := m.Delete(key(j)); !ok {
						t.Fatalf("delete %d failed", j)
					}
					delete(stored, j)
					break
				}
			}
			if err := m.Put(key(i), val(i)[:8]); err != nil {
				t.Fatalf("Put after delete: %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		stored[i] = true
	}
	for j := range stored {
		if j != 0 {
			mustGet(t, m, key(j), string(val(j)[:8]))
		}
	}
	if fails == 0 {
		t.Fatal("no ErrFull while inserting into a full map")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 5000, AverageKeySize: 11, AverageValueSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		mustPut(t, m, key(i), val(i))
	}
	for i := 0; i < 5000; i += 3 {
		m.Delete(key(i))
	}
	h, _ := m.AcquireInt64([]byte("counter"))
	h.Add(42)
	wantLen := m.Len()
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := Open(p, Options{}) // zero options: take the file's
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m2)
	if m2.Len() != wantLen {
		t.Fatalf("Len after reopen = %d, want %d", m2.Len(), wantLen)
	}
	for i := range 5000 {
		if i%3 == 0 {
			mustMiss(t, m2, key(i))
		} else {
			mustGet(t, m2, key(i), string(val(i)))
		}
	}
	h2, _ := m2.AcquireInt64([]byte("counter"))
	if h2.Load() != 42 {
		t.Fatalf("counter after reopen = %d", h2.Load())
	}
}

func TestClosedMap(t *testing.T) {
	m, err := Open(tempPath(t), small)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	m.Close()
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Put":    m.Put([]byte("k"), []byte("v")),
		"Get":    second(m.Get([]byte("k"))),
		"Has":    second(m.Has([]byte("k"))),
		"Delete": second(m.Delete([]byte("k"))),
		"Update": m.Update([]byte("k"), incr),
		"Range":  m.Range(func(k, v []byte) bool { return true }),
		"Sync":   m.Sync(),
		"Check":  m.Check(),
		"Acquire": func() error {
			_, err := m.AcquireInt64([]byte("k"))
			return err
		}(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed map: %v, want ErrClosed", name, err)
		}
	}
	if m.Len() != 0 {
		t.Errorf("Len on a closed map = %d", m.Len())
	}
}

func second[T any](_ T, err error) error { return err }

func TestStats(t *testing.T) {
	m := openTest(t, Options{Entries: 10000, AverageKeySize: 11, AverageValueSize: 8})
	for i := range 1234 {
		mustPut(t, m, key(i), val(i)[:8])
	}
	st := m.Stats()
	if st.Len != 1234 || st.Capacity != 10000 || st.Segments != len(st.PerSegment) {
		t.Fatalf("stats: %+v", st)
	}
	var sum int64
	for _, s := range st.PerSegment {
		sum += int64(s.Entries)
		if s.LockHolder != 0 {
			t.Fatalf("a segment is locked at rest: %+v", s)
		}
	}
	if sum != 1234 {
		t.Fatalf("per-segment entries sum to %d", sum)
	}
	if want := int64(1234 * entryBytes(11, 8, 0)); st.BytesUsed != want {
		t.Fatalf("BytesUsed = %d, want %d", st.BytesUsed, want)
	}
	fi, _ := osStat(m.Path())
	if fi != st.FileSize {
		t.Fatalf("FileSize = %d, file has %d bytes", st.FileSize, fi)
	}
}

// TestAllErr: AllErr says why an iteration stopped short (a damaged
// segment, a closed map) and says nil after a full pass or a break; All
// stops at the same place without a word.
func TestAllErr(t *testing.T) {
	count := func(seq func(func(k, v []byte) bool)) int {
		n := 0
		for range seq {
			n++
		}
		return n
	}

	t.Run("sound", func(t *testing.T) {
		m := openTest(t, small)
		for i := range 300 {
			mustPut(t, m, key(i), val(i))
		}
		err := errors.New("not set")
		if n := count(m.AllErr(&err)); n != 300 || err != nil {
			t.Fatalf("AllErr: %d entries, %v; want 300, nil", n, err)
		}
		err = errors.New("not set")
		for range m.AllErr(&err) {
			break
		}
		if err != nil {
			t.Fatalf("AllErr after a break: %v", err)
		}
	})

	t.Run("damaged", func(t *testing.T) {
		p := tempPath(t)
		m, err := Open(p, Options{Entries: 1000, AverageKeySize: 11, AverageValueSize: 16, ChecksumEntries: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for i := range 300 {
			mustPut(t, m, key(i), bigValue(i, 40))
		}
		bad := key(42)
		s := m.segmentOf(bad)
		_, _, e, found, _ := m.find(s, bad, m.hash(bad))
		if !found {
			t.Fatal("the key to damage is missing")
		}
		s.mem[e.off+4] = 28 // its value's length, under the entry's checksum

		var iterErr error
		n := count(m.AllErr(&iterErr))
		if !errors.Is(iterErr, ErrCorrupt) {
			t.Fatalf("AllErr over a damaged segment: %v; want ErrCorrupt", iterErr)
		}
		if n >= 300 {
			t.Fatalf("AllErr yielded %d entries past the damage", n)
		}
		if all := count(m.All()); all != n {
			t.Fatalf("All yielded %d entries, AllErr %d", all, n)
		}
	})

	t.Run("closed", func(t *testing.T) {
		m, err := Open(tempPath(t), small)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			mustPut(t, m, key(i), val(i))
		}
		var iterErr error
		n := 0
		for range m.AllErr(&iterErr) {
			if n++; n == 1 {
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !errors.Is(iterErr, ErrClosed) || n >= 300 {
			t.Fatalf("AllErr with Close inside the loop: %d entries, %v; want fewer than 300, ErrClosed", n, iterErr)
		}
		if n := count(m.AllErr(&iterErr)); n != 0 || !errors.Is(iterErr, ErrClosed) {
			t.Fatalf("AllErr of a closed map: %d entries, %v; want 0, ErrClosed", n, iterErr)
		}
	})

	t.Run("set", func(t *testing.T) {
		s, err := OpenSet(tempPath(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := s.Add(key(i)); err != nil {
				t.Fatal(err)
			}
		}
		var iterErr error
		n := 0
		for range s.AllErr(&iterErr) {
			n++
		}
		if n != 10 || iterErr != nil {
			t.Fatalf("Set.AllErr: %d keys, %v; want 10, nil", n, iterErr)
		}
		s.Close()
		for range s.AllErr(&iterErr) {
			t.Fatal("Set.AllErr yielded a key of a closed set")
		}
		if !errors.Is(iterErr, ErrClosed) {
			t.Fatalf("Set.AllErr of a closed set: %v", iterErr)
		}
	})
}
