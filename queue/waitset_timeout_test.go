package queue

import (
	"context"
	"testing"
	"time"
)

func TestWaitSetTimeout(t *testing.T) {
	q := openT(t, t.TempDir(), Options{})
	tl := tailerT(t, q)
	s := NewWaitSet()
	s.Add(tl)
	defer s.Remove(tl)
	got, err := s.WaitTimeout(context.Background(), nil, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("poll of an empty queue: %v, %v", got, err)
	}
	got, err = s.WaitTimeout(context.Background(), nil, 5*time.Millisecond)
	if err != nil || len(got) != 0 {
		t.Fatalf("timed wait on an empty queue: %v, %v", got, err)
	}
	if _, err := q.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	got, err = s.WaitTimeout(context.Background(), nil, 0)
	if err != nil || len(got) != 1 || got[0] != tl {
		t.Fatalf("poll after an append: %v, %v", got, err)
	}
	// A long timeout returns as soon as data is there.
	got, err = s.WaitTimeout(context.Background(), nil, time.Hour)
	if err != nil || len(got) != 1 {
		t.Fatalf("wait with data ready: %v, %v", got, err)
	}
}
