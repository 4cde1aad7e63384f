package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

func TestNamedTailerRestart(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{})
	for i := 0; i < 100; i++ {
		q.Append(msgOf(i))
	}
	tl, err := q.NamedTailer("billing")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if _, _, err := tl.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tl.Ack(); err != nil {
		t.Fatal(err)
	}
	tl.Next() // read but not acknowledged: seen again after a restart
	other, _ := q.NamedTailer("audit")
	other.Next()
	q.Close()

	q = openT(t, dir, Options{})
	tl, err = q.NamedTailer("billing")
	if err != nil {
		t.Fatal(err)
	}
	if _, m, err := tl.Next(); err != nil || !bytes.Equal(m, msgOf(40)) {
		t.Fatalf("restarted named tailer read %q %v, want %q", m, err, msgOf(40))
	}
	st, _ := q.Stats()
	if len(st.Tailers) != 2 || st.Tailers[0].Name != "billing" || !st.Tailers[0].Any || st.Tailers[1].Any {
		t.Fatalf("tailer stats %+v", st.Tailers)
	}
	if err := q.DeleteTailer("audit"); err != nil {
		t.Fatal(err)
	}
	if err := q.DeleteTailer("audit"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := q.NamedTailer(string(make([]byte, 49))); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("long name: %v", err)
	}
}

func TestReadIntoAndDrain(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	for i := 0; i < 10; i++ {
		q.Append(msgOf(i))
	}
	tl := tailerT(t, q)
	if _, ok := any(tl).(io.Reader); ok {
		t.Fatal("a Tailer reads whole messages: it must not pass for an io.Reader")
	}
	small := make([]byte, 4)
	if n, _, err := tl.ReadInto(small); err != io.ErrShortBuffer || n != len(msgOf(0)) {
		t.Fatalf("short read: %d %v", n, err)
	}
	buf := make([]byte, 64)
	n, idx, err := tl.ReadInto(buf)
	if err != nil || !bytes.Equal(buf[:n], msgOf(0)) {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	var got []uint64
	k, err := tl.Drain(4, func(i uint64, m []byte) bool { got = append(got, i); return true })
	if err != nil || k != 4 || got[0] != idx+1 {
		t.Fatalf("drain: %d %v %v", k, got, err)
	}
	k, _ = tl.Drain(0, func(uint64, []byte) bool { return true })
	if k != 5 {
		t.Fatalf("drained %d, want 5", k)
	}
}

func TestCycleFull(t *testing.T) {
	clk := newClock()
	q := openT(t, t.TempDir(), Options{clock: clk.Now, Roll: Minutely, MaxCycleSize: 64 << 10, BlockSize: 16 << 10})
	msg := make([]byte, 1000)
	n := 0
	for {
		_, err := q.Append(msg)
		if errors.Is(err, ErrCycleFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	// The header page, the padding at the start, the first index array
	// and room for the end mark take their share.
	pad := q.wcur.Load().headerAt(dataStart)
	if pad&flagMeta == 0 {
		t.Fatalf("the cycle starts with header %#x, not padding", pad)
	}
	if want := (64<<10 - dataStart - slotSize(pad&lenMask) - slotSize(indexArraySlot) - 8) / slotSize(1000); int64(n) != want {
		t.Fatalf("%d messages of 1000 bytes fit in 64 KiB, want %d", n, want)
	}
	if _, err := q.Append(make([]byte, 70<<10)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge message: %v", err)
	}
	clk.Advance(time.Minute)
	if _, err := q.Append(msg); err != nil {
		t.Fatalf("after the roll: %v", err)
	}
	tl := tailerT(t, q)
	k, err := tl.Drain(0, func(uint64, []byte) bool { return true })
	if err != nil || k != n+1 {
		t.Fatalf("read %d, %v; want %d", k, err, n+1)
	}
}

// TestDeadWriterSkipped claims a slot in the name of a writer lease that
// no process holds, as a writer killed mid-message leaves it.
func TestDeadWriterSkipped(t *testing.T) {
	q := openT(t, t.TempDir(), Options{SkipAfter: time.Millisecond})
	q.Append([]byte("before"))
	c := q.wcur.Load()
	dead := uint64(200)<<leaseShift | uint64(7)<<genShift
	_, deadOff, _, err := c.claim(10, flagBusy, dead)
	if err != nil {
		t.Fatal(err)
	}
	q.Append([]byte("after"))
	tl := tailerT(t, q)
	if _, m, _ := tl.Next(); string(m) != "before" {
		t.Fatalf("read %q", m)
	}
	if tl.HasNext() {
		t.Fatal("a busy slot was skipped before SkipAfter")
	}
	// Block waits SkipAfter, finds the writer dead and skips its slot.
	if err := tl.Wait(context.Background(), Block); err != nil {
		t.Fatal(err)
	}
	if idx, m, err := tl.Next(); err != nil || string(m) != "after" || idx != Index(c.num, 2) {
		t.Fatalf("read %#x %q %v", idx, m, err)
	}
	// A live writer's slot is never judged dead.
	w, _ := q.Reserve(4)
	if h := c.headerAt(tl.off); h&flagBusy == 0 || q.writerDead(h) {
		t.Fatalf("live writer's slot %#x judged dead", h)
	}
	copy(w.Bytes(), "live")
	w.Commit()
	if _, m, err := tl.Next(); err != nil || string(m) != "live" {
		t.Fatalf("read %q %v", m, err)
	}
	st, _ := q.Stats()
	if st.Cycles[0].Messages != 4 {
		t.Fatalf("cycle has %d slots, want 4", st.Cycles[0].Messages)
	}
	if h := c.headerAt(deadOff); h&flagSkipped == 0 || h&flagBusy != 0 {
		t.Fatalf("dead slot header %#x not marked skipped", h)
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{})
	q.Append([]byte("x"))
	ro := openT(t, dir, Options{ReadOnly: true})
	if _, err := ro.Append([]byte("y")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append read-only: %v", err)
	}
	tl := tailerT(t, ro)
	if _, m, err := tl.Next(); err != nil || string(m) != "x" {
		t.Fatalf("read %q %v", m, err)
	}
	if _, err := Open(t.TempDir()+"/missing", Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of a missing queue succeeded")
	}
}

func TestNoAllocations(t *testing.T) {
	for _, sums := range []bool{false, true} {
		t.Run(fmt.Sprintf("checksums %v", sums), func(t *testing.T) { testNoAllocations(t, Options{ChecksumMessages: sums}) })
	}
}

func testNoAllocations(t *testing.T, o Options) {
	q := openT(t, t.TempDir(), o)
	tl := tailerT(t, q)
	msg := make([]byte, 16)
	buf := make([]byte, 64)
	for i := 0; i < 10; i++ {
		q.Append(msg)
	}
	check := func(name string, f func()) {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
	check("Append", func() { q.Append(msg) })
	check("Reserve+Commit", func() {
		w, _ := q.Reserve(16)
		w.Commit()
	})
	check("HasNext+Next", func() {
		tl.HasNext()
		tl.Next()
	})
	check("ReadInto", func() { tl.ReadInto(buf) })
	check("Next at the end", func() {
		tl.SeekEnd()
		tl.Next()
	})
	fn := func(uint64, []byte) bool { return true }
	check("Drain", func() {
		q.Append(msg)
		tl.Drain(0, fn)
	})
}

// TestCommitAfterSkip: a writer whose slot a reader skipped, having judged
// it dead (its lease lost, or its process invisible from the reader's PID
// namespace), gets ErrAbandoned from Commit; the slot stays skipped for
// every reader, early or late.
func TestCommitAfterSkip(t *testing.T) {
	q := openT(t, t.TempDir(), Options{SkipAfter: time.Millisecond})
	w, err := q.Reserve(5)
	if err != nil {
		t.Fatal(err)
	}
	copy(w.Bytes(), "lost!")
	skippedIdx := w.Index()
	// Readers now see the lease of another generation: the writer is dead
	// to them.
	lease := &q.leases[2*int(w.hdr>>leaseShift&0xff)+1]
	lease.Add(1)
	early := tailerT(t, q)
	for deadline := time.Now().Add(20 * time.Second); w.c.headerAt(w.off)&flagSkipped == 0; {
		if _, _, err := early.Next(); err != ErrNoMessage {
			t.Fatalf("Next at a busy slot: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader never skipped the slot")
		}
		time.Sleep(time.Millisecond)
	}
	lease.Add(^uint64(0))
	if idx, err := w.Commit(); !errors.Is(err, ErrAbandoned) {
		t.Fatalf("Commit of a skipped slot: %#x, %v; want ErrAbandoned", idx, err)
	}
	after, err := q.Append([]byte("after"))
	if err != nil || after != skippedIdx+1 {
		t.Fatalf("Append after the skip: %#x %v, want %#x", after, err, skippedIdx+1)
	}
	for _, tl := range []*Tailer{early, tailerT(t, q)} {
		idx, m, err := tl.Next()
		if err != nil || string(m) != "after" || idx != after {
			t.Fatalf("read %#x %q %v; want %#x \"after\"", idx, m, err, after)
		}
	}
}

// TestPrefetchAnyTime: the prefetch methods are safe on a queue that has
// no cycle yet, one in use, and one closed (they read nothing that
// matters and a prefetch never faults).
func TestPrefetchAnyTime(t *testing.T) {
	q, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl := tailerT(t, q)
	prefetch := func() {
		q.PrefetchState()
		q.PrefetchCycle()
		q.PrefetchAppend()
		tl.Prefetch()
	}
	prefetch()
	q.Append([]byte("x"))
	prefetch()
	if n := testing.AllocsPerRun(100, prefetch); n != 0 {
		t.Fatalf("prefetching allocates %v times", n)
	}
	if _, m, err := tl.Next(); err != nil || string(m) != "x" {
		t.Fatalf("read %q %v after prefetching", m, err)
	}
	q.Close()
	prefetch()
}

func TestTailerAll(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	for i := range 5 {
		q.Append(msgOf(i))
	}
	tl := tailerT(t, q)
	var got []string
	for idx, m := range tl.All() {
		if _, seq := SplitIndex(idx); int(seq) != len(got) {
			t.Fatalf("index %#x for message %d", idx, len(got))
		}
		got = append(got, string(m))
		if len(got) == 3 {
			break
		}
	}
	for _, m := range tl.All() { // goes on after the break, to the end
		got = append(got, string(m))
	}
	if len(got) != 5 || got[3] != string(msgOf(3)) || got[4] != string(msgOf(4)) {
		t.Fatalf("read %q", got)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.Next(); err != ErrClosed {
		t.Fatalf("Next after Close: %v", err)
	}
}
