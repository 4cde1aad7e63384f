package latency

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

func TestStaggered(t *testing.T) {
	s := NewStaggered(4, 1000, time.Millisecond)
	if s.heap {
		t.Fatal("evenly staggered senders should be round robin")
	}
	for k := range 12 {
		id, due := s.Next()
		if want := int64(1000 + k*250_000); id != k%4 || due != want {
			t.Fatalf("send %d: sender %d at %d, want %d at %d", k, id, due, k%4, want)
		}
	}
}

// Against a model: any mix of periods and first times comes out in order
// of (due, id), every sender exactly on its own period.
func TestScheduleHeapModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n := 1 + rng.IntN(40)
		s := &Schedule{}
		first, every := make([]int64, n), make([]int64, n)
		for i := range n {
			first[i], every[i] = rng.Int64N(1000), 1+rng.Int64N(300)
			if id := s.Add(first[i], time.Duration(every[i])); id != i {
				t.Fatalf("Add returned %d, want %d", id, i)
			}
		}
		next := append([]int64(nil), first...)
		for range 500 {
			want := 0
			for i := range n {
				if next[i] < next[want] {
					want = i
				}
			}
			id, due := s.Next()
			if id != want || due != next[want] {
				t.Fatalf("trial %d: got sender %d at %d, want %d at %d", trial, id, due, want, next[want])
			}
			next[want] += every[want]
		}
	}
}

// Adding a sender after sends began switches to the heap correctly.
func TestScheduleAddLater(t *testing.T) {
	s := NewStaggered(2, 0, 100*time.Nanosecond)
	s.Next() // sender 0 at 0
	s.Add(10, 100)
	var got []int
	for range 6 {
		id, _ := s.Next()
		got = append(got, id)
	}
	// Due: 1@50, 0@100, 2@10 first: order 2@10, 1@50, 0@100, 2@110, 1@150, 0@200.
	if want := []int{2, 1, 0, 2, 1, 0}; !equalInts(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDrive(t *testing.T) {
	clock := NewFakeClock(0)
	s := NewStaggered(3, 0, 30*time.Nanosecond)
	last := make([]int64, 3)
	for i := range last {
		last[i] = -1
	}
	n := 0
	err := Drive(context.Background(), clock, s, func(id int, due int64) bool {
		if last[id] >= 0 && due-last[id] != 30 {
			t.Fatalf("sender %d: %d after %d", id, due, last[id])
		}
		if clock.Now() < due {
			t.Fatalf("released at %d before due %d", clock.Now(), due)
		}
		last[id] = due
		n++
		return n < 30
	})
	if err != nil || n != 30 {
		t.Fatalf("Drive: %v after %d sends", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Drive(ctx, clock, s, func(int, int64) bool { return true }); err != context.Canceled {
		t.Fatalf("Drive with a cancelled context: %v", err)
	}
}

func TestScheduleNoAllocs(t *testing.T) {
	s := NewStaggered(1000, 0, time.Millisecond)
	h := &Schedule{}
	for i := range 1000 {
		h.Add(int64(i), time.Duration(1000+i))
	}
	if n := testing.AllocsPerRun(1000, func() { s.Next(); h.Next() }); n != 0 {
		t.Fatalf("%v allocations per Next", n)
	}
}
