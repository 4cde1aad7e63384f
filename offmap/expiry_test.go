package offmap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// withClock sets the expiry clock to *t for the test.
func withClock(t *testing.T, clock *int64) {
	old := now
	now = func() int64 { return *clock }
	t.Cleanup(func() { now = old })
}

// TestExpiry: an entry is returned until its time passes, never after,
// by every read; a write restarts its time to live; Sweep and writers
// reclaim expired entries.
func TestExpiry(t *testing.T) {
	clock := time.Now().UnixNano()
	withClock(t, &clock)
	for _, sums := range []bool{false, true} {
		t.Run(fmt.Sprint("checksums=", sums), func(t *testing.T) {
			m := openTest(t, Options{Entries: 1000, AverageKeySize: 11, AverageValueSize: 16, TTL: time.Minute, ChecksumEntries: sums})
			for i := range 300 {
				mustPut(t, m, key(i), bigValue(i, growValueSize(i, 16)))
			}
			if err := m.PutExpiring([]byte("forever"), []byte("x"), time.Time{}); err != nil {
				t.Fatal(err)
			}
			clock += int64(30 * time.Second)
			for i := range 100 { // refreshed: another minute from now
				mustPut(t, m, key(i), bigValue(i, 8))
			}
			if err := m.Update(key(100), func(v []byte, _ bool) ([]byte, Op) { return v, OpPut }); err != nil {
				t.Fatal(err)
			}
			clock += int64(31 * time.Second) // keys 101-299 expired
			mustGet(t, m, key(5), string(bigValue(5, 8)))
			mustGet(t, m, key(100), string(bigValue(100, growValueSize(100, 16))))
			mustGet(t, m, []byte("forever"), "x")
			mustMiss(t, m, key(200))
			if ok, _ := m.Has(key(200)); ok {
				t.Fatal("Has reports an expired key")
			}
			seen := 0
			m.Range(func(k, v []byte) bool {
				if i, err := strconv.Atoi(strings.TrimPrefix(string(k), "key-")); err == nil && i > 100 {
					t.Errorf("Range returned expired %s", k)
				}
				seen++
				return true
			})
			if seen != 102 {
				t.Fatalf("Range saw %d entries, want 102", seen)
			}
			m.ViewKeys([][]byte{key(5), key(250)}, func(v [][]byte, found []bool) {
				if !found[0] || found[1] {
					t.Errorf("ViewKeys: found %v", found)
				}
			})
			if st := m.Stats(); st.Expired != 199 || st.Len != 301 || !st.Expiring || st.TTL != time.Minute {
				t.Fatalf("stats: expired %d, len %d, %v %v", st.Expired, st.Len, st.Expiring, st.TTL)
			}
			// A writer meeting an expired key reclaims it: Delete says it
			// was not there, PutIfAbsent stores.
			if ok, _ := m.Delete(key(101)); ok {
				t.Fatal("Delete of an expired key reported it present")
			}
			if ok, err := m.PutIfAbsent(key(102), []byte("new")); !ok || err != nil {
				t.Fatalf("PutIfAbsent over an expired key: %v, %v", ok, err)
			}
			n, err := m.Sweep()
			if err != nil || n != 197 {
				t.Fatalf("Sweep: %d, %v; want 197", n, err)
			}
			if st := m.Stats(); st.Expired != 0 || st.Len != 103 {
				t.Fatalf("after Sweep: expired %d, len %d", st.Expired, st.Len)
			}
			if err := m.PutTTL([]byte("brief"), []byte("y"), time.Second); err != nil {
				t.Fatal(err)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestExpiryOptions: entries expire only in maps made for it.
func TestExpiryOptions(t *testing.T) {
	m := openTest(t, small)
	if err := m.PutTTL([]byte("k"), []byte("v"), time.Second); !errors.Is(err, ErrOptionsMismatch) {
		t.Fatalf("PutTTL on a map whose entries cannot expire: %v", err)
	}
	if _, err := Open(m.Path(), Options{TTL: time.Second}); !errors.Is(err, ErrOptionsMismatch) {
		t.Fatalf("TTL for a map without expiry: %v", err)
	}
	if _, err := openHeap(Options{Entries: 10, AverageKeySize: 4, AverageValueSize: 4, TTL: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("negative TTL: %v", err)
	}
	p := tempPath(t)
	e, err := Open(p, Options{Entries: 10, AverageKeySize: 4, AverageValueSize: 4, Expiring: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Put([]byte("k"), []byte("v")); err != nil { // no TTL: lives until deleted
		t.Fatal(err)
	}
	if err := e.PutTTL([]byte("t"), []byte("v"), -time.Second); err != nil { // already expired
		t.Fatal(err)
	}
	mustGet(t, e, []byte("k"), "v")
	mustMiss(t, e, []byte("t"))
	e.Close()
}

func init() {
	// expiry-reader prints, for each key on its stdin, "yes" or "no":
	// whether the map returns it.
	children["expiry-reader"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer m.Close()
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			ok, err := m.Has([]byte(in.Text()))
			if err != nil {
				return err
			}
			fmt.Println(map[bool]string{true: "yes", false: "no"}[ok])
		}
		return nil
	}
	// expiry-sweeper sweeps and prints how many it reclaimed.
	children["expiry-sweeper"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		n, err := m.Sweep()
		fmt.Println(n)
		return err
	}
}

// TestExpiryAcrossProcesses: expiry times are wall-clock times in the
// file, so another process sees the same entries expired (a read-only
// one, by reading), and a third process's Sweep reclaims them.
func TestExpiryAcrossProcesses(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 1000, AverageKeySize: 11, AverageValueSize: 16, Expiring: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	var keys strings.Builder
	want := map[string]bool{}
	for i := range 200 {
		at := future
		if i%3 == 0 {
			at = past
		}
		if err := m.PutExpiring(key(i), bigValue(i, 16), at); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&keys, "%s\n", key(i))
		want[string(key(i))] = i%3 != 0
	}
	cmd := child(t, "expiry-reader", "MAP="+p)
	cmd.Stdin = strings.NewReader(keys.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 200 {
		t.Fatalf("reader printed %d lines", len(lines))
	}
	for i, l := range lines {
		if (l == "yes") != want[string(key(i))] {
			t.Fatalf("key %d: the other process says %s, want %v", i, l, want[string(key(i))])
		}
	}
	out, err = child(t, "expiry-sweeper", "MAP="+p).Output()
	if err != nil || strings.TrimSpace(string(out)) != "67" {
		t.Fatalf("sweeper: %q, %v; want 67", out, err)
	}
	if st := m.Stats(); st.Len != 133 || st.Expired != 0 {
		t.Fatalf("after the other process swept: %+v", st)
	}
}

// TestExpiryPinned: an entry that value handles point into never expires,
// or the map's TTL would detach the handles unseen: Acquire creates it
// without an expiry time and clears an existing one, Put keeps it cleared,
// and an expiry time of its own is refused.
func TestExpiryPinned(t *testing.T) {
	clock := time.Now().UnixNano()
	withClock(t, &clock)
	m := openTest(t, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8, TTL: time.Minute})
	mustPut(t, m, []byte("old"), make([]byte, 8)) // expires in a minute, until acquired
	mustPut(t, m, []byte("plain"), make([]byte, 8))
	old, err := m.AcquireInt64([]byte("old"))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := m.AcquireUint64([]byte("fresh"))
	if err != nil {
		t.Fatal(err)
	}
	type pair struct{ A, B atomic.Int64 }
	typed, err := Acquire[pair](m, []byte("typed"))
	if err != nil {
		t.Fatal(err)
	}
	clock += int64(2 * time.Minute)
	mustMiss(t, m, []byte("plain")) // the clock does make entries expire
	if n, err := m.Sweep(); err != nil || n != 1 {
		t.Fatalf("Sweep: %d, %v; want the one unpinned entry", n, err)
	}
	old.Add(5)
	fresh.Add(6)
	typed.B.Store(7)
	mustGet(t, m, []byte("old"), string(le64(5)))
	mustGet(t, m, []byte("fresh"), string(le64(6)))
	mustGet(t, m, []byte("typed"), string(append(le64(0), le64(7)...)))

	// A Put of the same size stores in place and does not bring the TTL back.
	mustPut(t, m, []byte("fresh"), le64(10))
	clock += int64(2 * time.Minute)
	if n, err := m.Sweep(); err != nil || n != 0 {
		t.Fatalf("Sweep after a Put to a pinned entry: %d, %v", n, err)
	}
	fresh.Add(1)
	mustGet(t, m, []byte("fresh"), string(le64(11)))

	if err := m.PutTTL([]byte("fresh"), le64(1), time.Second); !errors.Is(err, ErrPinned) {
		t.Fatalf("PutTTL on a pinned entry: %v, want ErrPinned", err)
	}
	if err := m.PutExpiring([]byte("old"), le64(1), time.Now().Add(time.Hour)); !errors.Is(err, ErrPinned) {
		t.Fatalf("PutExpiring on a pinned entry: %v, want ErrPinned", err)
	}
	mustGet(t, m, []byte("fresh"), string(le64(11)))
	if err := m.PutExpiring([]byte("old"), le64(9), time.Time{}); err != nil { // never: fine
		t.Fatal(err)
	}
	if old.Load() != 9 {
		t.Fatalf("handle reads %d after PutExpiring(never) of 9", old.Load())
	}

	// A 16-byte value is rewritten through the redo record: no TTL either.
	mustPut(t, m, []byte("typed"), append(le64(1), le64(2)...))
	// A pinned entry that carries a time (pinned by an older build) is
	// not deleted by writers or Sweep when the time passes.
	if err := m.PutTTL([]byte("legacy"), le64(3), time.Minute); err != nil {
		t.Fatal(err)
	}
	err = m.withKey([]byte("legacy"), func(sv segment, h keyHash) error {
		pos, w, _, found, _ := m.find(&sv, []byte("legacy"), h)
		if !found {
			return errors.New("legacy not found")
		}
		sv.slots[pos].Store(w | slotPinned)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clock += int64(2 * time.Minute)
	if n, err := m.Sweep(); err != nil || n != 0 {
		t.Fatalf("Sweep after a Put of 16 bytes and a pinned entry with a time: %d, %v", n, err)
	}
	typed.A.Add(1)
	mustGet(t, m, []byte("typed"), string(append(le64(2), le64(2)...)))
	mustPut(t, m, []byte("legacy"), le64(4)) // a writer meets it: kept, and its time cleared
	clock += int64(2 * time.Minute)
	mustGet(t, m, []byte("legacy"), string(le64(4)))
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
