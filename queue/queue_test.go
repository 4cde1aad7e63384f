package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock for Options.clock.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func openT(t testing.TB, dir string, o Options) *Queue {
	t.Helper()
	q, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeChecked(t, q) })
	return q
}

// closeChecked runs Check on a queue a test is done with, then closes it:
// every test leaves a sound queue, whatever it appended, rolled or
// skipped.
func closeChecked(t testing.TB, q *Queue) {
	t.Helper()
	if !q.closed.Load() {
		if _, err := q.Check(); err != nil {
			t.Errorf("Check after the test: %v", err)
		}
	}
	q.Close()
}

func tailerT(t testing.TB, q *Queue) *Tailer {
	t.Helper()
	tl, err := q.Tailer()
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func msgOf(i int) []byte { return []byte(fmt.Sprintf("message %06d", i)) }

// readAll reads every ready message.
func readAll(t testing.TB, tl *Tailer) (idx []uint64, msgs [][]byte) {
	t.Helper()
	for {
		i, m, err := tl.Next()
		if err == ErrNoMessage {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, i)
		msgs = append(msgs, bytes.Clone(m))
	}
}

func TestAppendRead(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	tl := tailerT(t, q)
	if _, _, err := tl.Next(); err != ErrNoMessage {
		t.Fatalf("empty queue: %v", err)
	}
	var want []uint64
	for i := 0; i < 1000; i++ {
		idx, err := q.Append(msgOf(i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, idx)
	}
	if _, err := q.Append(nil); err != nil {
		t.Fatal(err)
	}
	idx, msgs := readAll(t, tl)
	if len(msgs) != 1001 {
		t.Fatalf("read %d messages, want 1001", len(msgs))
	}
	for i := 0; i < 1000; i++ {
		if idx[i] != want[i] || !bytes.Equal(msgs[i], msgOf(i)) {
			t.Fatalf("message %d: %#x %q, want %#x %q", i, idx[i], msgs[i], want[i], msgOf(i))
		}
		if i > 0 && idx[i] != idx[i-1]+1 {
			t.Fatalf("indices not consecutive: %#x after %#x", idx[i], idx[i-1])
		}
	}
	if len(msgs[1000]) != 0 {
		t.Fatalf("empty message read as %q", msgs[1000])
	}
}

// writerMsg encodes (writer, n) in 16 bytes.
func writerMsg(buf []byte, writer, n int) []byte {
	buf = buf[:16]
	binary.LittleEndian.PutUint64(buf, uint64(writer))
	binary.LittleEndian.PutUint64(buf[8:], uint64(n))
	return buf
}

func parseWriterMsg(m []byte) (writer, n int, ok bool) {
	if len(m) != 16 {
		return 0, 0, false
	}
	return int(binary.LittleEndian.Uint64(m)), int(binary.LittleEndian.Uint64(m[8:])), true
}

// orderChecker checks that each writer's messages arrive exactly once and
// in order.
type orderChecker struct {
	next map[int]int
	last uint64
	seen int
}

func (o *orderChecker) add(idx uint64, m []byte) error {
	if o.next == nil {
		o.next = map[int]int{}
	}
	if o.seen > 0 && idx <= o.last {
		return fmt.Errorf("index %#x after %#x", idx, o.last)
	}
	o.last = idx
	o.seen++
	w, n, ok := parseWriterMsg(m)
	if !ok {
		return fmt.Errorf("message %#x: bad payload %x", idx, m)
	}
	if n != o.next[w] {
		return fmt.Errorf("writer %d: message %d where %d was due (index %#x)", w, n, o.next[w], idx)
	}
	o.next[w] = n + 1
	return nil
}

func TestConcurrentAppenders(t *testing.T) {
	const writers, per = 4, 20000
	q := openT(t, t.TempDir(), Options{})
	tl := tailerT(t, q)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			for i := 0; i < per; i++ {
				if _, err := q.Append(writerMsg(buf, w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var oc orderChecker
	ctx := context.Background()
	for oc.seen < writers*per {
		if err := tl.Wait(ctx, Yield); err != nil {
			t.Fatal(err)
		}
		idx, m, err := tl.Next()
		if err != nil {
			t.Fatal(err)
		}
		if err := oc.add(idx, m); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for w := 0; w < writers; w++ {
		if oc.next[w] != per {
			t.Fatalf("writer %d: %d messages", w, oc.next[w])
		}
	}
}

func TestReserveCommitAbort(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	tl := tailerT(t, q)
	w1, err := q.Reserve(5)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := q.Reserve(3)
	if err != nil {
		t.Fatal(err)
	}
	w3, err := q.Reserve(4)
	if err != nil {
		t.Fatal(err)
	}
	copy(w2.Bytes(), "two")
	if _, err := w2.Commit(); err != nil {
		t.Fatal(err)
	}
	if tl.HasNext() {
		t.Fatal("a message is visible before the one reserved ahead of it is committed")
	}
	copy(w1.Bytes(), "first")
	i1, err := w1.Commit()
	if err != nil {
		t.Fatal(err)
	}
	w3.Abort()
	if _, err := q.Append([]byte("four")); err != nil {
		t.Fatal(err)
	}
	idx, msgs := readAll(t, tl)
	if len(msgs) != 3 || string(msgs[0]) != "first" || string(msgs[1]) != "two" || string(msgs[2]) != "four" {
		t.Fatalf("read %q", msgs)
	}
	if idx[0] != i1 || idx[1] != i1+1 || idx[2] != i1+3 {
		t.Fatalf("indices %#x: the aborted slot must keep its index", idx)
	}
	if _, err := w1.Commit(); err == nil {
		t.Fatal("second Commit of one Writing succeeded")
	}
}

func TestRollOver(t *testing.T) {
	clk := newClock()
	var events []CycleEvent
	var mu sync.Mutex
	q := openT(t, t.TempDir(), Options{Roll: Minutely, clock: clk.Now, OnCycle: func(e CycleEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	tl := tailerT(t, q)
	var want []uint64
	for c := 0; c < 4; c++ {
		for i := 0; i < 10; i++ {
			idx, err := q.Append(msgOf(c*10 + i))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, idx)
		}
		clk.Advance(time.Minute + time.Duration(c)*time.Minute) // skips cycles too
	}
	idx, msgs := readAll(t, tl)
	if len(msgs) != 40 {
		t.Fatalf("read %d messages across cycles, want 40", len(msgs))
	}
	for i := range msgs {
		if idx[i] != want[i] || !bytes.Equal(msgs[i], msgOf(i)) {
			t.Fatalf("message %d: %#x %q, want %#x %q", i, idx[i], msgs[i], want[i], msgOf(i))
		}
		if _, seq := SplitIndex(idx[i]); seq != uint32(i%10) {
			t.Fatalf("message %d has sequence %d in its cycle", i, seq)
		}
	}
	cs, err := q.Cycles()
	if err != nil || len(cs) != 4 {
		t.Fatalf("cycles %v, %v", cs, err)
	}
	for i, c := range cs {
		if c0, _ := SplitIndex(want[i*10]); c != c0 {
			t.Fatalf("cycle %d is %d, messages say %d", i, c, c0)
		}
		name := filepath.Base(q.cyclePath(c))
		if _, err := os.Stat(filepath.Join(q.Dir(), name)); err != nil || len(name) != len("20260105-1000.oq") {
			t.Fatalf("cycle file %q: %v", name, err)
		}
	}
	mu.Lock()
	rolled := 0
	for _, e := range events {
		if e.Kind == CycleRolled {
			rolled++
		}
	}
	mu.Unlock()
	if rolled != 4 {
		t.Fatalf("%d roll events, want 4: %v", rolled, events)
	}
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range st.Cycles {
		if c.Messages != 10 || c.Sealed != (i < 3) || c.Err != nil {
			t.Fatalf("cycle stats %d: %+v", i, c)
		}
	}
}

func TestRollUnderLoad(t *testing.T) {
	const writers = 3
	per := 30000
	if testing.Short() {
		per = 5000
	}
	clk := newClock()
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Secondly, clock: clk.Now})
	q2 := openT(t, dir, Options{clock: clk.Now}) // a second handle, as another process would have
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			qq := q
			if w == 1 {
				qq = q2
			}
			buf := make([]byte, 16)
			for i := 0; i < per; i++ {
				if _, err := qq.Append(writerMsg(buf, w, i)); err != nil {
					t.Error(err)
					return
				}
				if w == 0 && i%1000 == 999 {
					clk.Advance(time.Second) // roll while the others append
				}
			}
		}()
	}
	tl := tailerT(t, q2)
	var oc orderChecker
	for oc.seen < writers*per {
		if err := tl.Wait(context.Background(), Yield); err != nil {
			t.Fatal(err)
		}
		idx, m, err := tl.Next()
		if err != nil {
			t.Fatal(err)
		}
		if err := oc.add(idx, m); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if tl.HasNext() {
		t.Fatal("extra message")
	}
	cs, _ := q.Cycles()
	if len(cs) < per/1000 {
		t.Fatalf("%d cycles, want at least %d", len(cs), per/1000)
	}
}

// Every cycle starts with padding of a random number of cache lines, so
// that queues written in lockstep do not cross pages together; readers
// step over it and the first message is still sequence 0.
func TestCyclesStartAtRandomPhases(t *testing.T) {
	phases := map[int64]bool{}
	for i := range 16 {
		q := openT(t, t.TempDir(), Options{})
		if _, err := q.Append([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		h := q.wcur.Load().headerAt(dataStart)
		n := int64(h & lenMask)
		if h&^lenMask != flagMeta || slotSize(uint64(n))%64 != 0 || slotSize(uint64(n)) >= pageSize {
			t.Fatalf("cycle starts with header %#x, want padding of whole cache lines, at most a page", h)
		}
		phases[n] = true
		idx, msg, err := tailerT(t, q).Next()
		if err != nil || len(msg) != 1 || msg[0] != byte(i) || idx&(1<<32-1) != 0 {
			t.Fatalf("first message: index %#x, %v, %v", idx, msg, err)
		}
	}
	if len(phases) < 2 {
		t.Fatalf("16 cycles all start with %v bytes of padding", phases)
	}
}

// The longest and the shortest start padding leave a cycle of the
// smallest block size writable, readable and able to roll.
func TestStartPadExtremes(t *testing.T) {
	defer func(f func() int) { startPadLines = f }(startPadLines)
	for _, lines := range []int{1, pageSize/64 - 1} {
		startPadLines = func() int { return lines }
		clk := newClock()
		q := openT(t, t.TempDir(), Options{clock: clk.Now, Roll: Minutely, BlockSize: pageSize})
		for i := range 3 {
			if _, err := q.Append([]byte{byte(i)}); err != nil {
				t.Fatalf("padding of %d lines, append %d: %v", lines, i, err)
			}
			clk.Advance(time.Minute)
		}
		tl := tailerT(t, q)
		for i := range 3 {
			_, msg, err := tl.Next()
			if err != nil || len(msg) != 1 || msg[0] != byte(i) {
				t.Fatalf("padding of %d lines, message %d: %v, %v", lines, i, msg, err)
			}
		}
	}
}
