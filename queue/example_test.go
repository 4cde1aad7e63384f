package queue_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/offmap/offmap/queue"
)

// A queue is a directory: any process that opens it may append and read.
func Example() {
	dir, err := os.MkdirTemp("", "orders")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	q, err := queue.Open(dir, queue.Options{Roll: queue.Daily})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	for _, m := range []string{"buy 10", "sell 4"} {
		if _, err := q.Append([]byte(m)); err != nil {
			log.Fatal(err)
		}
	}

	t, err := q.Tailer()
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	for {
		_, msg, err := t.Next() // msg is a view into the file: copy it to keep it
		if err == queue.ErrNoMessage {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(msg))
	}
	// Output:
	// buy 10
	// sell 4
}

// A named tailer keeps its acknowledged position in the queue: a consumer
// that restarts (here: opens a new tailer of the same name) goes on after
// the last message it acknowledged.
func ExampleQueue_NamedTailer() {
	dir, err := os.MkdirTemp("", "billing")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	for _, m := range []string{"a", "b", "c"} {
		if _, err := q.Append([]byte(m)); err != nil {
			log.Fatal(err)
		}
	}

	consume := func(n int) {
		t, err := q.NamedTailer("billing")
		if err != nil {
			log.Fatal(err)
		}
		defer t.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for range n {
			// Block sleeps until an append, in any process, wakes it.
			if err := t.Wait(ctx, queue.Block); err != nil {
				log.Fatal(err)
			}
			_, msg, err := t.Next()
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("processed", string(msg))
			if err := t.Ack(); err != nil {
				log.Fatal(err)
			}
		}
	}
	consume(2)
	fmt.Println("restart")
	consume(1)
	// Output:
	// processed a
	// processed b
	// restart
	// processed c
}

// An event loop that serves many queues in turn can start bringing in the
// memory of the queues it serves next while it works on this one, so that
// their cache and TLB misses overlap: the state of the queue three ahead,
// the cycle the queue two ahead appends to, and the slot the next queue
// writes. Prefetching reads nothing that matters and never fails; it pays
// off with thousands of queues, whose state does not stay in the cache.
func ExampleQueue_PrefetchAppend() {
	root, err := os.MkdirTemp("", "loop")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	var qs []*queue.Queue
	for i := range 8 {
		q, err := queue.Open(filepath.Join(root, fmt.Sprint(i)), queue.Options{})
		if err != nil {
			log.Fatal(err)
		}
		defer q.Close()
		qs = append(qs, q)
	}

	msg := []byte("tick")
	for round := 0; round < 100; round++ {
		for i, q := range qs {
			qs[(i+3)%len(qs)].PrefetchState()
			qs[(i+2)%len(qs)].PrefetchCycle()
			qs[(i+1)%len(qs)].PrefetchAppend()
			if _, err := q.Append(msg); err != nil {
				log.Fatal(err)
			}
		}
	}
	st, err := qs[7].Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Cycles[0].Messages, "messages in the last queue")
	// Output: 100 messages in the last queue
}

// The last messages of a queue, as tail -n shows the last lines, and the
// queue read backwards.
func ExampleTailer_SeekLast() {
	dir, err := os.MkdirTemp("", "events")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	for i := range 10 {
		if _, err := q.Append(fmt.Appendf(nil, "event %d", i)); err != nil {
			log.Fatal(err)
		}
	}

	t, err := q.Tailer()
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	if err := t.SeekLast(3); err != nil {
		log.Fatal(err)
	}
	for _, msg := range t.All() {
		fmt.Println(string(msg))
	}
	for range 2 {
		_, msg, err := t.Prev()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("back to", string(msg))
	}
	n, err := q.Count(0, math.MaxUint64)
	fmt.Println(n, "messages", err)
	// Output:
	// event 7
	// event 8
	// event 9
	// back to event 9
	// back to event 8
	// 10 messages <nil>
}

// Order has a fixed layout (no pointers, no padding): it travels as its
// memory image, with no encoding step and no allocation.
type Order struct {
	ID    uint64
	Price int64 // in 1e-4 units
	Qty   int32
	Side  uint8 // 0 buy, 1 sell
	_     [3]byte
}

// Typed messages, the Go counterpart of Chronicle Queue's method writers
// and readers.
func ExampleNewAppender() {
	dir, err := os.MkdirTemp("", "orders")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	orders, err := queue.NewAppender[Order](q)
	if err != nil {
		log.Fatal(err)
	}
	for i, o := range []Order{{ID: 1, Price: 1_234_500, Qty: 100}, {ID: 2, Price: 1_234_700, Qty: 50, Side: 1}} {
		o := o
		if _, err := orders.Append(&o); err != nil {
			log.Fatal(i, err)
		}
	}

	t, err := q.Tailer()
	if err != nil {
		log.Fatal(err)
	}
	r, err := queue.NewReader[Order](t)
	if err != nil {
		log.Fatal(err)
	}
	var o Order
	for {
		if _, err := r.Next(&o); err == queue.ErrNoMessage {
			break
		} else if err != nil {
			log.Fatal(err)
		}
		fmt.Println(o.ID, o.Price, o.Qty, o.Side)
	}
	// Output:
	// 1 1234500 100 0
	// 2 1234700 50 1
}

// A process that only reads learns of the cycle files other processes
// create and delete (Options.OnCycle tells a process only of its own).
func ExampleQueue_WatchCycles() {
	dir, err := os.MkdirTemp("", "events")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := queue.Open(dir, queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append([]byte("first")); err != nil { // creates today's cycle file
		log.Fatal(err)
	}

	r, err := queue.Open(dir, queue.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.WatchCycles(ctx, 10*time.Millisecond, func(e queue.CycleEvent) {
		fmt.Println(e.Kind == queue.CycleCreated, filepath.Dir(e.Path) == dir)
		cancel() // one event is enough here
	})
	fmt.Println(err)
	// Output:
	// true true
	// context canceled
}

// A queue bounded by time: with the Fast roll (a cycle file every 100 ms)
// and KeepCycles 2, the process that rolls to a new cycle deletes all but
// the newest two files, so the queue holds the last 100 to 200 ms of
// messages. Readers that reach a deleted cycle go on from the next one.
func ExampleOptions_keepCycles() {
	dir, err := os.MkdirTemp("", "ticks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, queue.Options{Roll: queue.Fast, KeepCycles: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	var written []uint32 // the cycles appended to, in order
	for len(written) < 4 {
		idx, err := q.Append([]byte("tick"))
		if err != nil {
			log.Fatal(err)
		}
		if c, _ := queue.SplitIndex(idx); len(written) == 0 || written[len(written)-1] != c {
			written = append(written, c)
		}
		time.Sleep(10 * time.Millisecond)
	}

	kept, err := q.Cycles()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(kept), "cycle files kept, the newest:", slices.Equal(kept, written[2:]))
	t, err := q.Tailer()
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	idx, _, err := t.Next()
	c, _ := queue.SplitIndex(idx)
	fmt.Println("the first message left is in the third cycle:", c == written[2], err)
	// Output:
	// 2 cycle files kept, the newest: true
	// the first message left is in the third cycle: true <nil>
}

// Reserve builds a message in place, in the mapped file, with no copy
// from a buffer of its own; Commit publishes it. A reservation given up
// with Abort leaves a slot that readers skip.
func ExampleQueue_Reserve() {
	dir, err := os.MkdirTemp("", "prices")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	for _, price := range []uint64{101, 0, 103} {
		w, err := q.Reserve(8)
		if err != nil {
			log.Fatal(err)
		}
		if price == 0 { // nothing to send after all
			w.Abort()
			continue
		}
		binary.LittleEndian.PutUint64(w.Bytes(), price)
		if _, err := w.Commit(); err != nil {
			log.Fatal(err)
		}
	}

	t, err := q.Tailer()
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	for idx, msg := range t.All() {
		_, seq := queue.SplitIndex(idx)
		fmt.Println(seq, binary.LittleEndian.Uint64(msg))
	}
	// Output:
	// 0 101
	// 2 103
}

// One goroutine serves many queues: a WaitSet blocks until some of its
// tailers have messages and returns those, woken by appends in this
// process or any other. While it reads one tailer it prefetches the next.
func ExampleWaitSet() {
	root, err := os.MkdirTemp("", "feeds")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)

	set := queue.NewWaitSet()
	names := map[*queue.Tailer]string{}
	var queues []*queue.Queue
	for _, name := range []string{"orders", "quotes"} {
		q, err := queue.Open(filepath.Join(root, name), queue.Options{})
		if err != nil {
			log.Fatal(err)
		}
		defer q.Close()
		t, err := q.Tailer()
		if err != nil {
			log.Fatal(err)
		}
		defer t.Close()
		defer set.Remove(t) // before its Close
		set.Add(t)
		names[t] = name
		queues = append(queues, q)
	}

	done := make(chan struct{})
	go func() { // another goroutine, or another process, appends
		defer close(done)
		for i := range 3 {
			for _, q := range queues {
				if _, err := q.Append(fmt.Appendf(nil, "%d", i)); err != nil {
					log.Fatal(err)
				}
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string][]string{}
	var ready []*queue.Tailer
	for n := 0; n < 6; {
		ready, err = set.Wait(ctx, ready)
		if err != nil {
			log.Fatal(err)
		}
		for i, t := range ready {
			if i+1 < len(ready) {
				ready[i+1].Prefetch()
			}
			for _, msg := range t.All() {
				got[names[t]] = append(got[names[t]], string(msg))
				n++
			}
		}
	}
	<-done
	fmt.Println("orders", got["orders"])
	fmt.Println("quotes", got["quotes"])
	// Output:
	// orders [0 1 2]
	// quotes [0 1 2]
}

// Retention by hand: DeleteCycles removes old cycle files but spares those
// a named tailer has not acknowledged past, unless forced.
func ExampleQueue_DeleteCycles() {
	dir, err := os.MkdirTemp("", "audit")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, queue.Options{Roll: queue.Fast}) // a cycle file every 100 ms
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	var written []uint32 // the cycles appended to
	for len(written) < 3 {
		idx, err := q.Append([]byte("entry"))
		if err != nil {
			log.Fatal(err)
		}
		if c, _ := queue.SplitIndex(idx); len(written) == 0 || written[len(written)-1] != c {
			written = append(written, c)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The auditor has processed the first cycle and the start of the
	// second.
	audit, err := q.NamedTailer("audit")
	if err != nil {
		log.Fatal(err)
	}
	defer audit.Close()
	for {
		idx, _, err := audit.Next()
		if err != nil {
			log.Fatal(err)
		}
		if c, _ := queue.SplitIndex(idx); c == written[1] {
			break
		}
	}
	if err := audit.Ack(); err != nil {
		log.Fatal(err)
	}

	// (Deleted cycles may include one that the queue rolled into but
	// nobody appended to, on a machine slow to make the first append.)
	below := func(cs []uint32, c uint32) bool { return len(cs) > 0 && cs[len(cs)-1] < c }
	deleted, err := q.DeleteCycles(1, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted the first cycle:", slices.Contains(deleted, written[0]) && below(deleted, written[1]))
	deleted, err = q.DeleteCycles(1, true)
	if err != nil {
		log.Fatal(err)
	}
	kept, err := q.Cycles()
	fmt.Println("forced, deleted the second:", slices.Contains(deleted, written[1]) && below(deleted, written[2]),
		"kept the last:", slices.Equal(kept, written[2:]), err)
	// Output:
	// deleted the first cycle: true
	// forced, deleted the second: true kept the last: true <nil>
}
