package queue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/offmap/offmap/values"
)

// trade has a fixed layout: it travels as its memory image.
type trade struct {
	ID     uint64
	Price  int64 // 1e-4 units
	Qty    int32
	Side   uint8
	_      [3]byte
	Venue  [8]byte
	Stamps [2]int64
}

func tradeOf(i int) trade {
	return trade{ID: uint64(i), Price: int64(i) * 100, Qty: int32(i % 1000), Side: uint8(i % 2), Venue: [8]byte{'X', byte('A' + i%26)}, Stamps: [2]int64{int64(i), -int64(i)}}
}

func TestTypedMessages(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	a, err := NewAppender[trade](q)
	if err != nil {
		t.Fatal(err)
	}
	tl := tailerT(t, q)
	r, err := NewReader[trade](tl)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		v := tradeOf(i)
		if _, err := a.Append(&v); err != nil {
			t.Fatal(err)
		}
	}
	var got trade
	for i := range 100 {
		if _, err := r.Next(&got); err != nil || got != tradeOf(i) {
			t.Fatalf("message %d: %+v %v", i, got, err)
		}
	}
	if _, err := r.Next(&got); err != ErrNoMessage {
		t.Fatalf("past the end: %v", err)
	}
	// A message of another size is an error, and the reader stays.
	q.Append([]byte("not a trade"))
	if _, err := r.Next(&got); !errors.Is(err, values.ErrSize) {
		t.Fatalf("a message of another size: %v", err)
	}
	if _, m, err := tl.Next(); err != nil || string(m) != "not a trade" {
		t.Fatalf("the reader moved past the message it refused: %q %v", m, err)
	}
	// No allocation either way.
	v := tradeOf(7)
	if n := testing.AllocsPerRun(1000, func() {
		a.Append(&v)
		r.Next(&got)
	}); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
	if _, err := NewAppender[struct{ S string }](q); err == nil {
		t.Fatal("an appender of a type without a fixed layout")
	}
}

// note has no fixed layout: it travels as its binary form.
type note struct {
	Author string
	Text   string
}

func (n *note) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(n.Author)))
	b = append(b, n.Author...)
	return append(b, n.Text...), nil
}

func (n *note) UnmarshalBinary(b []byte) error {
	l, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < l {
		return errors.New("note: bad length")
	}
	n.Author, n.Text = string(b[k:k+int(l)]), string(b[k+int(l):])
	return nil
}

func TestBinaryMessages(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	var buf []byte
	for i := range 10 {
		var err error
		if _, buf, err = AppendBinary(q, &note{Author: fmt.Sprint("user", i), Text: "hello"}, buf); err != nil {
			t.Fatal(err)
		}
	}
	q.Append([]byte{0xff}) // not a note
	tl := tailerT(t, q)
	var n note
	for i := range 10 {
		if _, err := NextBinary(tl, &n); err != nil || n.Author != fmt.Sprint("user", i) || n.Text != "hello" {
			t.Fatalf("note %d: %+v %v", i, n, err)
		}
	}
	if _, err := NextBinary(tl, &n); err == nil {
		t.Fatal("a message that is not a note was read as one")
	}
	if _, m, _ := tl.Next(); len(m) != 1 {
		t.Fatal("the tailer moved past the message UnmarshalBinary refused")
	}
}

// TestTypedAcrossProcesses: another process appends trades, this one
// reads them as they come.
func TestTypedAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Fast}) // the helpers' options
	r, _ := NewReader[trade](tailerT(t, q))
	const n = 20000
	cmd := helperCmd(t, "typed-append", dir, n)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var got trade
	for i := range n {
		for {
			wctx, stop := context.WithTimeout(ctx, 100*time.Millisecond)
			err := r.Tailer().Wait(wctx, Block)
			stop()
			if err == nil {
				break
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("the appender failed at trade %d: %v", i, err)
				}
				exited <- nil // done appending: what is left is in the queue
			default:
			}
			if ctx.Err() != nil {
				t.Fatalf("waiting for trade %d: %v", i, ctx.Err())
			}
		}
		if _, err := r.Next(&got); err != nil || got != tradeOf(i) {
			t.Fatalf("trade %d: %+v %v", i, got, err)
		}
	}
	if err := <-exited; err != nil {
		t.Fatal(err)
	}
}
