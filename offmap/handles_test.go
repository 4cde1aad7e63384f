package offmap

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/offmap/offmap/values"
)

func TestInt64Handle(t *testing.T) {
	m := openTest(t, small)
	h, err := m.AcquireInt64([]byte("hits"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Load() != 0 {
		t.Fatalf("new counter = %d", h.Load())
	}
	if h.Add(5) != 5 || h.Add(-2) != 3 {
		t.Fatal("Add")
	}
	// The handle writes the map's bytes: Get sees them, no Put needed.
	v, _ := m.Get([]byte("hits"))
	if int64(binary.LittleEndian.Uint64(v)) != 3 {
		t.Fatalf("Get after Add = %v", v)
	}
	if !h.CompareAndSwap(3, 10) || h.CompareAndSwap(3, 11) || h.Load() != 10 {
		t.Fatal("CompareAndSwap")
	}
	h.Store(-7)
	if h.Swap(1) != -7 {
		t.Fatal("Swap")
	}
	// A second handle on the same key shares the value.
	h2, _ := m.AcquireInt64([]byte("hits"))
	h2.Add(1)
	if h.Load() != 2 {
		t.Fatalf("second handle: %d", h.Load())
	}
	// A Put of the same size goes through; Update too; both seen by handles.
	mustPut(t, m, []byte("hits"), binary.LittleEndian.AppendUint64(nil, 100))
	if h.Load() != 100 {
		t.Fatalf("after Put: %d", h.Load())
	}
	if err := m.Update([]byte("hits"), incr); err != nil || h.Load() != 101 {
		t.Fatalf("after Update: %d, %v", h.Load(), err)
	}
	// A Put that would move or resize the value is refused.
	if err := m.Put([]byte("hits"), []byte("longer than eight")); !errors.Is(err, ErrValueSize) {
		t.Fatalf("resizing Put on a pinned value: %v", err)
	}
	if h.Load() != 101 {
		t.Fatalf("refused Put changed the value: %d", h.Load())
	}
}

func TestHandleOnExistingValue(t *testing.T) {
	m := openTest(t, small)
	mustPut(t, m, []byte("eight"), binary.LittleEndian.AppendUint64(nil, 41))
	h, err := m.AcquireInt64([]byte("eight"))
	if err != nil || h.Add(1) != 42 {
		t.Fatalf("handle on an existing 8-byte value: %v", err)
	}
	mustPut(t, m, []byte("three"), []byte("abc"))
	if _, err := m.AcquireInt64([]byte("three")); !errors.Is(err, ErrValueSize) {
		t.Fatalf("Int64 handle on a 3-byte value: %v", err)
	}
	if _, err := m.AcquireInt32([]byte("eight")); !errors.Is(err, ErrValueSize) {
		t.Fatalf("Int32 handle on an 8-byte value: %v", err)
	}
}

func TestOtherHandles(t *testing.T) {
	m := openTest(t, small)
	u, _ := m.AcquireUint64([]byte("u"))
	if u.Add(math.MaxUint64) != math.MaxUint64 || u.Add(1) != 0 {
		t.Fatal("Uint64 wraps")
	}
	i32, err := m.AcquireInt32([]byte("i32"))
	if err != nil {
		t.Fatal(err)
	}
	i32.Add(7)
	if v, _ := m.Get([]byte("i32")); len(v) != 4 || binary.LittleEndian.Uint32(v) != 7 {
		t.Fatalf("Int32 value bytes %v", v)
	}
	mustPut(t, m, []byte("i32"), binary.LittleEndian.AppendUint32(nil, 100))
	if i32.Load() != 100 {
		t.Fatalf("Int32 after Put: %d", i32.Load())
	}
	f, _ := m.AcquireFloat64([]byte("f"))
	f.Store(1.5)
	if f.Add(0.25) != 1.75 || !f.CompareAndSwap(1.75, 3) || f.Load() != 3 {
		t.Fatal("Float64")
	}
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want %q", want)
		}
		if !strings.Contains(r.(string), want) {
			t.Fatalf("panic %q, want %q", r, want)
		}
	}()
	f()
}

func TestHandleAfterClose(t *testing.T) {
	m, err := Open(tempPath(t), small)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := m.AcquireInt64([]byte("n"))
	f, _ := m.AcquireFloat64([]byte("f"))
	h.Add(1)
	m.Close()
	// A prefetch is a hint: harmless on an unmapped value or a zero handle.
	h.Prefetch()
	values.Int64{}.Prefetch()
	mustPanic(t, "used after its map", func() { h.Add(1) })
	mustPanic(t, "used after its map", func() { h.Load() })
	mustPanic(t, "used after its map", func() { f.Add(1) })
	var zero values.Int64
	mustPanic(t, "zero Int64 handle", func() { zero.Add(1) })
}

func TestHandleAfterDelete(t *testing.T) {
	m := openTest(t, small)
	h, _ := m.AcquireInt64([]byte("gone"))
	h.Add(10)
	if ok, _ := m.Delete([]byte("gone")); !ok {
		t.Fatal("Delete")
	}
	mustMiss(t, m, []byte("gone"))
	// Fill the map's neighbourhood with other keys of the same size: none
	// may share the detached value's space.
	for i := range 300 {
		mustPut(t, m, key(i), binary.LittleEndian.AppendUint64(nil, uint64(i)))
	}
	h.Add(1000) // writes into the detached entry only
	for i := range 300 {
		mustGet(t, m, key(i), string(binary.LittleEndian.AppendUint64(nil, uint64(i))))
	}
	// The key can come back; it is a new entry, not the handle's.
	h2, _ := m.AcquireInt64([]byte("gone"))
	if h2.Load() != 0 {
		t.Fatalf("re-created key starts at %d", h2.Load())
	}
	h.Add(1)
	if h2.Load() != 0 {
		t.Fatal("old handle writes into the re-created key")
	}
	st := m.Stats()
	if st.Detached != 1 {
		t.Fatalf("Detached = %d", st.Detached)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestDetachedReclaimed: the space of a pinned, deleted entry is freed when
// a process opens the map with no other process attached.
func TestDetachedReclaimed(t *testing.T) {
	p := tempPath(t)
	m, _ := Open(p, small)
	for i := range 50 {
		h, _ := m.AcquireInt64(key(i))
		h.Add(1)
		m.Delete(key(i))
	}
	if st := m.Stats(); st.Detached != 50 || st.Len != 0 || st.BytesUsed == 0 {
		t.Fatalf("before reopen: %+v", st)
	}
	// Another opener while m is open must not reclaim.
	other, _ := Open(p, Options{})
	if other.Stats().Detached != 50 {
		t.Fatal("reclaimed while another opener was attached")
	}
	other.Close()
	m.Close()
	m2, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m2)
	if st := m2.Stats(); st.Detached != 0 || st.BytesUsed != 0 {
		t.Fatalf("after exclusive reopen: detached %d, bytes used %d", st.Detached, st.BytesUsed)
	}
}
