//go:build linux || darwin || windows

package shm

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"os"
	"syscall"
)

// Token names, in a lock word or a writer lease, the process that holds
// it. It is never zero. What it means depends on the system: on Linux the
// number of a byte of the shared file on which the holder keeps a lock
// (witness_linux.go), on macOS its pid and start time (witness_darwin.go).
// Tokens are compared only on the machine that made them: one found in a
// file copied from elsewhere names no process here, and is judged dead.
type Token uint64

// PID returns the holder's process id, for display only: on Linux it is
// the pid as the holder's own pid namespace numbers it, which may name
// another process, or none, in the caller's.
func (t Token) PID() int { return tokenPID(t) }

// ErrNoFileLocks is returned when a process cannot mark a shared file as in
// use by it (see Witness): the file system lacks the locks it needs.
var ErrNoFileLocks = errors.New("the file system cannot hold the lock by which processes sharing a file tell the live from the dead (open file description locks); use a local file system such as tmpfs, ext4 or xfs")

// Witness is how the processes sharing one file tell whether the holder of
// a lock or a lease is alive: something the kernel keeps for every process
// that has the file open and drops when it dies, and that every other
// process with the file open can see, whatever its pid namespace, its uid
// or what its /proc shows (internal/shm/doc.go, Liveness). Each open of a
// shared file for writing has its own Witness, and so its own Token, for
// as long as the file stays open: closing the file ends it.
type Witness struct {
	rc    syscall.RawConn // the shared file; nil for memory no other process sees
	token Token           // 0 for a process that only judges others
}

// NewWitness makes the witness of this open of f. A holder (an open for
// writing, whose process will take locks and leases) is given a token of
// its own, which other processes judge alive until f is closed or the
// process dies; an error wrapping ErrNoFileLocks means the file system
// cannot provide one. A process that only reads (holder false) can judge
// the tokens of others and has none.
func NewWitness(f *os.File, holder bool) (*Witness, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &Witness{rc: rc}
	if holder {
		if w.token, err = takeToken(rc); err != nil {
			return nil, &os.PathError{Op: "witness", Path: f.Name(), Err: err}
		}
	}
	return w, nil
}

// LocalWitness returns a witness for memory that only this process sees
// (maps in ordinary Go memory, for tests): its own token is the only live
// one.
func LocalWitness() *Witness {
	return &Witness{token: Token(1<<62 | randomBits()&(1<<62-1) | 1)}
}

// Token returns this open's token, or 0 for one that only reads.
func (w *Witness) Token() Token { return w.token }

// Alive reports whether the holder named by t may still be running. It is
// false only when the holder is known to be gone; when the answer cannot
// be had (the file system refuses the question) it is true, so that a
// live holder never loses what it holds: its waiters wait, up to their
// timeout, instead.
func (w *Witness) Alive(t Token) bool {
	switch {
	case t == 0:
		return false
	case t == w.token:
		return true
	case w.rc == nil:
		return false
	}
	return tokenAlive(w.rc, t)
}

func randomBits() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails: it would end the program
	return binary.LittleEndian.Uint64(b[:])
}
