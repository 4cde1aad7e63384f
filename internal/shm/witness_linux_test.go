package shm

import (
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
