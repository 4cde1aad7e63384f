package shm

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

func TestAliveSelfAndDead(t *testing.T) {
	self := Self()
	if self.PID() != os.Getpid() || !Alive(self) {
		t.Fatalf("Self() = %#x is not this live process", uint64(self))
	}
	// The same pid with another start time is a recycled pid: dead.
	if Alive(MakeToken(self.PID(), uint64(self.StartTime())+1)) {
		t.Fatal("a token with another start time counts as alive")
	}
	// A process that has exited and been reaped is dead.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if Alive(MakeToken(cmd.Process.Pid, 0)) {
		t.Fatal("a reaped process counts as alive")
	}
	if Alive(MakeToken(1<<31-1, 0)) {
		t.Fatal("a pid that cannot exist counts as alive")
	}
}

func TestAliveZombie(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, dead, err := procStart(cmd.Process.Pid)
	if err != nil || dead {
		t.Fatalf("procStart of a running child: dead %v, %v", dead, err)
	}
	tok := MakeToken(cmd.Process.Pid, start)
	if !Alive(tok) {
		t.Fatal("a running child counts as dead")
	}
	cmd.Process.Kill()
	// Not reaped yet: a zombie, which must count as dead.
	for {
		_, dead, err := procStart(cmd.Process.Pid)
		if err != nil || dead {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if Alive(tok) {
		t.Fatal("a zombie counts as alive")
	}
	cmd.Wait()
}

func TestMutexExcludesAndTakesOverDeadHolder(t *testing.T) {
	mem := Heap(MutexSize)
	l := MutexAt(mem, 0)
	self := Self()
	var mu sync.Mutex // checks exclusion
	var wg sync.WaitGroup
	counter := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				if _, err := l.Lock(self, time.Minute); err != nil {
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
	dead := MakeToken(1<<31-1, 0)
	if !l.TryLock(dead) {
		t.Fatal("TryLock on a free lock failed")
	}
	tookOver, err := l.Lock(self, time.Minute)
	if err != nil || !tookOver || l.Owner() != self {
		t.Fatalf("Lock over a dead holder: tookOver=%v, err=%v, owner=%#x", tookOver, err, uint64(l.Owner()))
	}
	l.Unlock()
	// A live holder is never robbed: the waiter times out.
	l.TryLock(self)
	if _, err := l.Lock(self, 50*time.Millisecond); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("Lock against a live holder: %v", err)
	}
	l.Unlock()
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
