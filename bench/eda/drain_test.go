package eda

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when the drain pauses.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) pause()         { c.t = c.t.Add(5 * time.Millisecond) }

// TestDrain: the wait for the chain's backlog goes on while the count
// rises, however long past grace, and ends as late only at its bound; it
// ends as lost once the count stands still for grace.
func TestDrain(t *testing.T) {
	const grace = 50 * time.Millisecond
	start := time.Unix(1e9, 0)
	rising := func(step, stop int64) func() (int64, error) { // stop: where it stands still
		n := int64(0)
		return func() (int64, error) {
			n = min(n+step, stop)
			return n, nil
		}
	}
	for _, c := range []struct {
		name       string
		through    func() (int64, error)
		bound      time.Duration
		moving     bool
		err        error
		waitedFrom time.Duration // at least, on the fake clock
		waitedTo   time.Duration // at most
	}{
		// 1,000 polls of 5 ms: 5 s, a hundred times grace.
		{"rises slowly to want", rising(1, 1<<62), time.Minute, false, nil, 4995 * time.Millisecond, 4995 * time.Millisecond},
		{"stands still below want", rising(1, 400), time.Minute, false, nil, 400*5*time.Millisecond + grace - 5*time.Millisecond, 400*5*time.Millisecond + grace},
		{"never gets there", rising(1, 999), 2 * time.Second, true, nil, 2 * time.Second, 2 * time.Second},
		{"rises by leaps, standing still between", func() func() (int64, error) {
			calls, n := 0, int64(0)
			return func() (int64, error) {
				if calls++; calls%9 == 0 { // every 45 ms, under grace
					n += 100
				}
				return n, nil
			}
		}(), time.Minute, false, nil, 0, time.Minute},
		{"a child fails", func() (int64, error) { return 0, errors.New("child 2 exited") }, time.Minute, false, errors.New("child 2 exited"), 0, 0},
	} {
		clock := &fakeClock{t: start}
		d := drain{want: 1000, grace: grace, bound: start.Add(c.bound), now: clock.now, pause: clock.pause}
		moving, err := d.wait(context.Background(), c.through)
		waited := clock.t.Sub(start)
		if moving != c.moving || (err == nil) != (c.err == nil) || err != nil && !strings.Contains(err.Error(), c.err.Error()) {
			t.Errorf("%s: moving %v, err %v; want %v, %v", c.name, moving, err, c.moving, c.err)
		}
		if waited < c.waitedFrom || waited > c.waitedTo {
			t.Errorf("%s: waited %v, want %v to %v", c.name, waited, c.waitedFrom, c.waitedTo)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clock := &fakeClock{t: start}
	d := drain{want: 1000, grace: grace, bound: start.Add(time.Minute), now: clock.now, pause: clock.pause}
	if _, err := d.wait(ctx, rising(1, 1<<62)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestCheckCountersLate: once every message is through, each counter must
// equal the messages sent; while the chain was still draining, a counter
// may fall short, but never above the one before it, and always equal to
// what its service handled.
func TestCheckCountersLate(t *testing.T) {
	m, err := openCounters(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := plan{Instances: 1, Runs: 1, RunLength: 10e6, Interval: 1e6} // 10 sends
	set := func(counts ...int64) map[[2]int]int64 {
		handled := map[[2]int]int64{}
		for s, n := range counts {
			if err := m.Put(counterKey(0, s+1), binary.LittleEndian.AppendUint64(nil, uint64(n))); err != nil {
				t.Fatal(err)
			}
			handled[[2]int{0, s + 1}] = n
		}
		return handled
	}
	for _, c := range []struct {
		name   string
		counts []int64
		late   bool
		errs   int
	}{
		{"all through", []int64{10, 10, 10, 10, 10}, false, 0},
		{"short, settled", []int64{10, 10, 9, 9, 9}, false, 3},
		{"short, late", []int64{10, 10, 9, 7, 7}, true, 0},
		{"a service above the one before it, late", []int64{10, 8, 9, 7, 7}, true, 1},
		{"over the sends, late", []int64{11, 10, 9, 7, 7}, true, 1},
	} {
		handled := set(c.counts...)
		if errs := checkCounters(m, 1, handled, p, c.late); len(errs) != c.errs {
			t.Errorf("%s: %d errors %q, want %d", c.name, len(errs), errs, c.errs)
		}
		handled[[2]int{0, 3}]++ // a counter that differs from its service's count
		if errs := checkCounters(m, 1, handled, p, c.late); len(errs) != c.errs+1 {
			t.Errorf("%s, miscounted: %d errors %q, want %d", c.name, len(errs), errs, c.errs+1)
		}
	}
}
