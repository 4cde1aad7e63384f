package shm

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestMutexExcludesAndTakesOverDeadHolder(t *testing.T) {
	mem := Heap(MutexSize)
	l := MutexAt(mem, 0)
	w := LocalWitness()
	self := w.Token()
	var mu sync.Mutex // checks exclusion
	var wg sync.WaitGroup
	counter := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				if _, err := l.Lock(w, time.Minute); err != nil {
					t.Error(err)
					return
				}
				if !mu.TryLock() {
					t.Error("two holders at once")
				}
				counter++
				mu.Unlock()
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if counter != 8000 {
		t.Fatalf("counter %d", counter)
	}
	// A dead holder: the next Lock takes over and says so.
	dead := Token(1<<31 - 1)
	if !l.TryLock(dead) {
		t.Fatal("TryLock on a free lock failed")
	}
	tookOver, err := l.Lock(w, time.Minute)
	if err != nil || !tookOver || l.Owner() != self {
		t.Fatalf("Lock over a dead holder: tookOver=%v, err=%v, owner=%#x", tookOver, err, uint64(l.Owner()))
	}
	l.Unlock()
	// A live holder is never robbed: the waiter times out.
	l.TryLock(self)
	if _, err := l.Lock(w, 50*time.Millisecond); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("Lock against a live holder: %v", err)
	}
	l.Unlock()
	// An open for reading only has no token to lock with.
	if _, err := l.Lock(&Witness{}, time.Minute); err == nil || l.Owner() != 0 {
		t.Fatalf("Lock without a token: %v, owner %#x", err, uint64(l.Owner()))
	}
}

func TestCopies(t *testing.T) {
	mem := Heap(64)
	src := []byte("hello, shared memory!")
	Store(mem, src)
	if !bytes.Equal(mem[:len(src)], src) || !bytes.Equal(mem[len(src):Pad8(len(src))], make([]byte, Pad8(len(src))-len(src))) {
		t.Fatalf("Store wrote %q", mem[:32])
	}
	dst := make([]byte, len(src))
	Load(dst, mem)
	if !bytes.Equal(dst, src) {
		t.Fatalf("Load read %q", dst)
	}
	if !Equal(mem, src) || Equal(mem, []byte("hello, shared memory?")) {
		t.Fatal("Equal")
	}
	Zero(mem[:32])
	if !bytes.Equal(mem[:32], make([]byte, 32)) {
		t.Fatal("Zero")
	}
}

func TestHeapAlignmentAndBounds(t *testing.T) {
	for _, n := range []int{1, 63, 64, 4097} {
		b := Heap(n)
		if len(b) != n || !Aligned(b, 64) {
			t.Fatalf("Heap(%d): %d bytes, aligned %v", n, len(b), Aligned(b, 64))
		}
	}
	b := Heap(16)
	for name, f := range map[string]func(){
		"out of range": func() { U64(b, 16) },
		"misaligned":   func() { U64(b, 4) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
