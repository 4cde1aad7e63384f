package latency

import (
	"testing"
	"time"
)

// WaitUntil never returns early, whatever the spin window; how late it
// returns depends on the machine, so it is logged, not asserted (see
// BenchmarkPacerWait).
func TestPacerNeverEarly(t *testing.T) {
	for _, o := range []PacerOptions{{}, {Spin: 50 * time.Microsecond}, {Spin: DefaultSpin}, {GoTimer: true}} {
		p := NewPacer(o)
		var late []int64
		for _, d := range []time.Duration{0, 10 * time.Microsecond, 100 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
			for range 5 {
				due := Nanotime() + int64(d)
				got := p.WaitUntil(due)
				if now := Nanotime(); got < due || now < due {
					t.Fatalf("%+v, wait %v: returned %d (now %d) before %d", o, d, got, now, due)
				}
				late = append(late, got-due)
			}
		}
		t.Logf("%+v: lateness %v ns", o, late)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A wait in the past returns at once.
	p := NewPacer(PacerOptions{})
	if got := p.WaitUntil(0); got <= 0 {
		t.Fatalf("WaitUntil(0) = %d", got)
	}
}

func TestPacerNoAllocs(t *testing.T) {
	for _, o := range []PacerOptions{{}, {GoTimer: true}} {
		p := NewPacer(o)
		p.WaitUntil(Nanotime() + 100_000) // opens the timer
		if n := testing.AllocsPerRun(20, func() { p.WaitUntil(Nanotime() + 100_000) }); n != 0 {
			t.Fatalf("%+v: %v allocations per wait", o, n)
		}
		p.Close()
	}
}

func TestFakeClock(t *testing.T) {
	c := NewFakeClock(100)
	if c.WaitUntil(50) != 100 || c.WaitUntil(150) != 150 || c.Now() != 150 {
		t.Fatal("WaitUntil must jump forward only")
	}
	c.Advance(time.Microsecond)
	if c.Now() != 1150 {
		t.Fatalf("Now %d after Advance", c.Now())
	}
}

func TestNanotimeMonotonic(t *testing.T) {
	a := Nanotime()
	time.Sleep(time.Millisecond)
	if b := Nanotime(); b-a < int64(time.Millisecond) {
		t.Fatalf("Nanotime advanced %d ns over a 1 ms sleep", b-a)
	}
}
