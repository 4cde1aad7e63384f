//go:build linux || darwin || windows

package shm

import (
	"errors"
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// ErrLockTimeout is returned by Mutex.Lock when a live holder keeps the
// lock longer than the caller's timeout.
var ErrLockTimeout = errors.New("lock held by a live process for longer than the lock timeout")

// Mutex is a lock word in shared memory whose holder is a process. A
// waiter that finds the holder dead (see Witness.Alive) takes the lock
// over and is told so, so that it can repair what the holder left half
// done. A holder whose liveness cannot be known is waited for.
//
// Layout (16 bytes, 8-byte aligned; part of the map and queue file formats):
//
//	offset  0  owner     uint64  0 when free, else the holder's Token
//	offset  8  wake      uint32  futex word, bumped by an unlock that sees sleepers
//	offset 12  sleepers  uint32  waiters asleep on wake
//
// Steps:
//  1. Lock: CAS owner 0 -> Token. On failure spin, then yield, then sleep
//     on the futex: sleepers++, read wake, re-check owner, FUTEX_WAIT(wake),
//     sleepers--.
//  2. A waiter that has waited FirstHolderCheck, and then every
//     holderCheckEvery, checks the holder with its Witness;
//     if it is dead, CAS owner holder -> own Token takes the lock over.
//  3. Unlock: store owner 0; if sleepers != 0, bump wake and FUTEX_WAKE all.
//
// Goroutines that use one open of the file share its Token: the lock
// excludes them from one another like any other holders, and it is not
// reentrant.
type Mutex struct {
	owner    atomic.Uint64
	wake     atomic.Uint32
	sleepers atomic.Uint32
}

var errNoToken = errors.New("shm: an open for reading only cannot take a lock")

// MutexSize is the size of a Mutex in shared memory.
const MutexSize = 16

// FirstHolderCheck is how long a waiter waits before it first asks
// whether the holder lives; a variable so that tests of damaged files can
// shorten it.
var FirstHolderCheck = 20 * time.Millisecond

// How often a waiter asks again, and how long it sleeps on the futex.
const (
	holderCheckEvery = 200 * time.Millisecond
	futexNap         = 5 * time.Millisecond
)

// TryLock takes the lock if it is free.
func (l *Mutex) TryLock(self Token) bool {
	return l.owner.CompareAndSwap(0, uint64(self))
}

// Lock takes the lock for w's token. tookOver is true when the previous
// holder had died holding it: what it protects may be half updated. A
// timeout <= 0 waits for a live holder without limit.
func (l *Mutex) Lock(w *Witness, timeout time.Duration) (tookOver bool, err error) {
	if w.token == 0 {
		return false, errNoToken
	}
	if l.owner.CompareAndSwap(0, uint64(w.token)) {
		return false, nil
	}
	return l.lockSlow(w, timeout)
}

func (l *Mutex) lockSlow(w *Witness, timeout time.Duration) (bool, error) {
	self := uint64(w.token)
	var b Backoff
	start := time.Now()
	nextCheck := start.Add(FirstHolderCheck)
	for {
		cur := l.owner.Load()
		if cur == 0 {
			if l.owner.CompareAndSwap(0, self) {
				return false, nil
			}
			continue
		}
		if b.Sleeping() {
			now := time.Now()
			if now.After(nextCheck) {
				nextCheck = now.Add(holderCheckEvery)
				if !w.Alive(Token(cur)) {
					if l.owner.CompareAndSwap(cur, self) {
						return true, nil
					}
					continue
				}
				if timeout > 0 && now.Sub(start) > timeout {
					return false, ErrLockTimeout
				}
			}
			l.sleep(cur)
			continue
		}
		b.Pause()
	}
}

// sleep waits on the futex while the lock is held by holder.
func (l *Mutex) sleep(holder uint64) {
	l.sleepers.Add(1)
	w := l.wake.Load()
	if l.owner.Load() == holder {
		FutexWait(&l.wake, w, futexNap)
	}
	l.decSleepers()
}

func (l *Mutex) decSleepers() {
	for {
		n := l.sleepers.Load()
		if n == 0 || l.sleepers.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// Unlock releases the lock and wakes sleepers, if any.
func (l *Mutex) Unlock() {
	l.owner.Store(0)
	if l.sleepers.Load() != 0 {
		l.wake.Add(1)
		FutexWake(&l.wake, math.MaxInt32)
	}
}

// Owner returns the holder's token, or 0 when the lock is free.
func (l *Mutex) Owner() Token { return Token(l.owner.Load()) }

// ResetSleepers clears the sleeper count. A repair calls it after a take
// over: a waiter killed while asleep leaves the count raised, which would
// cost every later unlock a futex wake. Live sleepers wake on their own
// within futexNap.
func (l *Mutex) ResetSleepers() { l.sleepers.Store(0) }

// ForceUnlock frees the lock whatever its holder; only for repair tools
// that have checked the holder is dead.
func (l *Mutex) ForceUnlock(holder Token) bool {
	return l.owner.CompareAndSwap(uint64(holder), 0)
}

// Backoff paces a wait loop: spin briefly, then yield to other goroutines,
// then report Sleeping so the caller can block in the kernel.
type Backoff struct{ n int }

const (
	spinRounds  = 64
	yieldRounds = 64
)

// Pause spins or yields once.
func (b *Backoff) Pause() {
	b.n++
	if b.n <= spinRounds {
		for i := 0; i < 32; i++ {
			spinHint()
		}
		return
	}
	runtime.Gosched()
}

// Sleeping reports whether spinning and yielding are used up.
func (b *Backoff) Sleeping() bool { return b.n >= spinRounds+yieldRounds }

// Reset starts the pacing over.
func (b *Backoff) Reset() { b.n = 0 }

var spinSink atomic.Uint32

// spinHint burns a few cycles without touching shared cache lines.
func spinHint() { spinSink.Load() }

// Yield lets other goroutines run.
func Yield() { runtime.Gosched() }

// MutexAt returns the Mutex at b[off:].
func MutexAt(b []byte, off int) *Mutex { return Overlay[Mutex](b, off) }
