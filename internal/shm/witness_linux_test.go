package shm

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWitnessEndsWithItsOpen: on Linux the witness belongs to the open
// file, not to the process: another open of the same process sees it as
// any other process would, two opens never share a byte, and closing an
// open ends its token.
func TestWitnessEndsWithItsOpen(t *testing.T) {
	p, f := sharedFile(t)
	g, _, err := OpenFile(p, false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewWitness(f, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWitness(g, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token() == b.Token() || !a.Alive(b.Token()) || !b.Alive(a.Token()) {
		t.Fatalf("two opens: %#x and %#x", a.Token(), b.Token())
	}
	if a.Token()&(3<<62) != tokenMark || a.Token().PID() != unix.Getpid() {
		t.Fatalf("token %#x has not the documented shape", a.Token())
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(a.Token()), Len: 1}
	if err := unix.FcntlFlock(g.Fd(), unix.F_OFD_SETLK, &lk); err == nil {
		t.Fatal("two opens hold one witness byte")
	}
	g.Close()
	if a.Alive(b.Token()) {
		t.Fatal("the token of a closed open counts as alive")
	}
}

// BenchmarkAlive compares ways for one process to ask whether another
// lives (internal/shm/doc.go, Liveness): the witness this package uses
// (an OFD lock on the shared file, tested with F_OFD_GETLK), a flock on a
// file of the holder's own (opened, tried, closed), and the pid and start
// time read from /proc, as before.
func BenchmarkAlive(b *testing.B) {
	p, f := sharedFile(b)
	holder, _, err := OpenFile(p, false)
	if err != nil {
		b.Fatal(err)
	}
	defer holder.Close()
	w, err := NewWitness(holder, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ofd", func(b *testing.B) {
		judge, err := NewWitness(f, false)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if !judge.Alive(w.Token()) {
				b.Fatal("dead")
			}
		}
	})
	b.Run("flock-file", func(b *testing.B) {
		own := p + ".live"
		hf, err := os.Create(own)
		if err != nil {
			b.Fatal(err)
		}
		defer hf.Close()
		if err := unix.Flock(int(hf.Fd()), unix.LOCK_EX); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			fd, err := unix.Open(own, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			if unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB) == nil {
				b.Fatal("dead")
			}
			unix.Close(fd)
		}
	})
	b.Run("proc-stat", func(b *testing.B) {
		stat := "/proc/" + strconv.Itoa(os.Getpid()) + "/task/" + strconv.Itoa(os.Getpid()) + "/stat"
		for b.Loop() {
			if unix.Kill(os.Getpid(), 0) != nil {
				b.Fatal("dead")
			}
			if _, err := os.ReadFile(stat); err != nil {
				b.Fatal(err)
			}
		}
	})
}
