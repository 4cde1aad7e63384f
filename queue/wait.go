package queue

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// WaitMode is how Tailer.Wait waits for the next message.
type WaitMode int

// The wait modes, from the lowest latency to the lowest CPU cost.
const (
	// Block sleeps until an append wakes the tailer: appends in this
	// process wake it directly, appends in other processes through the
	// queue's doorbell (a futex in the metadata file) and this process's
	// notifier, which watches many doorbells with one thread. An idle
	// blocked tailer costs no thread of its own and next to no CPU (the
	// notifier wakes once a second to see whether a process killed
	// mid-append left a wake-up unsent, and an append that finds a
	// wake-up long pending sends it itself; in the same round it checks
	// that no sleeping tailer's cycle file was truncated). A queue
	// opened read-only cannot ring or watch the doorbell: Block then
	// polls like Park.
	Block WaitMode = iota
	// Spin polls without pause: the lowest latency, a whole core. It lets
	// the goroutines that share its thread run once a millisecond; more
	// often would wake idle threads that take the spinner's CPU.
	Spin
	// Yield polls and lets other goroutines run between polls.
	Yield
	// Park polls and sleeps between polls, from Options.ParkMin doubling
	// to Options.ParkMax. For messages that come at a known rate, set
	// both to about 1/8 of the gap between them, as the consumers of the
	// EDA benchmark (bench/eda) sleep.
	Park
	// BlockThread sleeps as Block does, but in the kernel on the queue's
	// doorbell from the waiting goroutine's own thread, as a C reader
	// would: no notifier between the append and the tailer, so no second
	// thread to wake. On a 2-vCPU VM it takes a third off the wake-up's
	// median and half off its p99 (docs/BENCHMARKS.md), for the price of
	// one OS thread per tailer waiting so: for a few latency-critical
	// consumers, Block for the many. A queue opened read-only polls like
	// Park.
	BlockThread
)

var waitModeNames = [...]string{Block: "block", Spin: "spin", Yield: "yield", Park: "park", BlockThread: "block-thread"}

// String returns the mode's name, for logs and flags.
func (m WaitMode) String() string {
	if m.known() {
		return waitModeNames[m]
	}
	return fmt.Sprintf("WaitMode(%d)", int(m))
}

func (m WaitMode) known() bool { return m >= 0 && int(m) < len(waitModeNames) }

// Wait returns nil as soon as the tailer has a message to read (HasNext),
// or the context's error, or the error that reading met. An unknown
// mode is an error wrapping ErrInvalidOptions.
func (t *Tailer) Wait(ctx context.Context, mode WaitMode) error {
	if !mode.known() {
		return fmt.Errorf("%w: unknown wait mode %d", ErrInvalidOptions, int(mode))
	}
	if (mode == Block || mode == BlockThread) && t.q.readOnly {
		mode = Park
	}
	park := t.q.opts.ParkMin
	var yield shm.SpinYield
	checkAt := mono() + int64(fileRecheck)
	for {
		if _, err := t.peek(); err != ErrNoMessage {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		switch mode {
		case Block:
			if t.spin(t.q.opts.BlockSpin) {
				return nil
			}
			return t.block(ctx)
		case BlockThread:
			if t.spin(t.q.opts.BlockSpin) {
				return nil
			}
			return t.blockThread(ctx)
		case Spin:
			yield.Poll()
		case Yield:
			runtime.Gosched()
		case Park:
			time.Sleep(park)
			park = min(2*park, t.q.opts.ParkMax)
			if now := mono(); now >= checkAt {
				checkAt = now + int64(fileRecheck)
				if err := t.checkFile(); err != nil {
					return err
				}
			}
		}
	}
}

// fileRecheck is how often a tailer that sleeps in Wait checks that its
// cycle file was not truncated underneath (one fstat).
var fileRecheck = time.Second

// untilRecheck is how long a tailer asleep in BlockThread sleeps before
// its next checkFile: to the next multiple of fileRecheck on the
// monotonic clock, so that all such tailers of the process wake together,
// not at scattered instants. (Tailers asleep in Block are checked by the
// notifier: shard.checkSizes.)
func untilRecheck() time.Duration {
	return fileRecheck - time.Duration(mono()%int64(fileRecheck))
}

// checkFile reports a cycle file that became shorter than the tailer
// mapped: reading on would fault.
func (t *Tailer) checkFile() error {
	if t.c == nil {
		return nil
	}
	size, err := t.c.fileSize()
	if err != nil {
		return err
	}
	return t.c.shorterThanMapped(size, max(len(t.mem), len(t.c.mem())))
}

// spin polls for up to d and reports whether a message (or an error to
// return) came.
func (t *Tailer) spin(d time.Duration) bool {
	if d <= 0 {
		return false
	}
	deadline := time.Now().Add(d)
	var yield shm.SpinYield
	for i := 0; ; i++ {
		if _, err := t.peek(); err != ErrNoMessage {
			return true
		}
		if i&15 == 15 && time.Now().After(deadline) {
			return false
		}
		yield.Poll()
	}
}

// block sleeps on the tailer's listener until a message is ready. It
// keeps no timer of its own for the once-a-second file check: the
// notifier thread that watches the queue's doorbell checks the size of
// the cycle file the listener names (shard.checkSizes) and wakes the tailer
// only when the file became shorter than mapped, and the tailer then
// checks again itself. A thousand idle tailers so cost a thousand
// fstats a second on the notifier's threads, not a thousand wake-ups.
func (t *Tailer) block(ctx context.Context) error {
	l := &t.listener
	q := t.q
	q.wake.add(q, l)
	defer q.wake.remove(l)
	defer l.sleepOn.Store(nil)
	for {
		_, err := t.peek()
		if err != ErrNoMessage {
			return err
		}
		// The cycle the tailer sleeps at, which peek may have changed.
		l.sleepOn.Store(t.c)
		var stall <-chan time.Time
		if t.stalled() {
			// At a message whose writer may be dead: look again when
			// SkipAfter has passed, since no append will wake us.
			if l.timer == nil {
				l.timer = time.NewTimer(q.opts.SkipAfter)
			} else {
				l.timer.Reset(q.opts.SkipAfter)
			}
			stall = l.timer.C
		}
		select {
		case <-l.ch:
			if l.cut.Swap(false) {
				if err := t.checkFile(); err != nil {
					return err
				}
			}
		case <-stall:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// blockThread sleeps in FUTEX_WAIT on the doorbell until it changes. While
// the tailer waits, this process counts once more among the doorbell's
// sleepers, so that every append rings it, this process's own appends
// included (see notify); the count goes up before the check for data,
// so an append after that check rings. A cancelled context, and Close,
// change the doorbell to wake it.
func (t *Tailer) blockThread(ctx context.Context) error {
	q := t.q
	q.threadWaiters.Add(1)
	defer q.threadWaiters.Add(-1)
	if q.closed.Load() {
		return ErrClosed
	}
	q.sleepers.Add(1)
	defer decSleepers(q)
	if ctx.Done() != nil {
		woken := make(chan struct{})
		stop := context.AfterFunc(ctx, func() { wakeBell(q.bell); close(woken) })
		defer func() {
			if !stop() {
				<-woken // it touches the doorbell: done before Close may unmap it
			}
		}()
	}
	recheckAt := mono() + int64(untilRecheck())
	for {
		seen := clearBell(q.bell)
		if _, err := t.peek(); err != ErrNoMessage {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if q.closed.Load() {
			return ErrClosed
		}
		now := mono()
		if now >= recheckAt {
			if err := t.checkFile(); err != nil {
				return err
			}
			recheckAt = now + int64(untilRecheck())
		}
		sleep := time.Duration(recheckAt - now)
		if t.stalled() {
			// At a message whose writer may be dead: no append will
			// ring, look again when SkipAfter has passed.
			sleep = min(sleep, q.opts.SkipAfter)
		}
		shm.FutexWait(q.bell, seen, sleep)
	}
}

// decSleepers takes one off the doorbell's sleepers, never below zero
// (recovery may have reset the count).
func decSleepers(q *Queue) {
	for {
		n := q.sleepers.Load()
		if n == 0 || q.sleepers.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// wakeBell changes the doorbell, if no wake-up is pending already, and
// wakes everything asleep on it: they look for data and find none.
func wakeBell(bell *atomic.Uint32) {
	if b := bell.Load(); b&1 == 0 {
		bell.CompareAndSwap(b, b+1)
	}
	shm.FutexWake(bell, math.MaxInt32)
}

// listener is what an append in this process, or the notifier, wakes:
// a tailer's channel, or a WaitSet's entry for one queue.
type listener struct {
	ch    chan struct{} // capacity 1
	timer *time.Timer
	entry *setEntry
	// sleepOn is the cycle a tailer asleep in block has mapped, for the
	// notifier's size check; cut is set with the wake-up when the check
	// found the file shorter.
	sleepOn atomic.Pointer[cycle]
	cut     atomic.Bool
}

func (l *listener) init(*Tailer) { l.ch = make(chan struct{}, 1) }

func (l *listener) fire() {
	if l.entry != nil {
		l.entry.notify()
		return
	}
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

// waitState is a queue's list of listeners in this process and whether
// the process watches the queue's doorbell.
type waitState struct {
	list  atomic.Pointer[[]*listener] // nil when empty; copied on change
	armed atomic.Bool                 // counted among the doorbell's sleepers

	mu      sync.Mutex
	shard   *shard
	useless int // wakes in a row that found no listener
}

func (w *waitState) add(q *Queue, l *listener) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var list []*listener
	if p := w.list.Load(); p != nil {
		list = append(list, *p...)
	}
	list = append(list, l)
	w.list.Store(&list)
	w.useless = 0
	if !w.armed.Load() && !q.readOnly && !q.closed.Load() {
		// Count this process among the sleepers before the caller checks
		// for data, so that an append after that check rings.
		q.sleepers.Add(1)
		w.armed.Store(true)
		procNotifier.watch(q, clearBell(q.bell))
	}
}

func (w *waitState) remove(l *listener) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.list.Load()
	if p == nil {
		return
	}
	list := make([]*listener, 0, len(*p))
	for _, x := range *p {
		if x != l {
			list = append(list, x)
		}
	}
	if len(list) == 0 {
		w.list.Store(nil)
	} else {
		w.list.Store(&list)
	}
}

// idleWake is called by the notifier after a doorbell change: a process
// that no longer has listeners stops watching after two such wakes, so
// other processes stop ringing for it.
func (w *waitState) idleWake(q *Queue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.list.Load() != nil {
		w.useless = 0
		return
	}
	if w.useless++; w.useless >= 2 {
		w.disarmLocked(q)
	}
}

func (w *waitState) disarmLocked(q *Queue) {
	if !w.armed.Load() {
		return
	}
	procNotifier.unwatch(q, w.shard)
	w.shard = nil
	w.armed.Store(false)
	decSleepers(q)
}

// disarmAll stops watching before the queue is unmapped.
func (w *waitState) disarmAll(q *Queue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.disarmLocked(q)
}
