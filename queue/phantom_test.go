package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestDamagedSlotLength damages the length word of every message's slot
// header in many ways, one damage at a time, and reads the queue from the
// start: a tailer may stop early or go on, but one that returns a message
// never appended (a part of another message, an index array, padding or
// the next header read as one) must also report ErrCorrupt. The walk is
// checked against the sparse index at each index boundary and against the
// write hint where it ends; damage is caught by the first such check
// after it. The length word alone cannot tell a message that reads
// shorter, or longer by its zero padding, within its slot; with
// ChecksumMessages no read returns a message never appended at all.
func TestDamagedSlotLength(t *testing.T) {
	defer func(g func() int) { startPadLines = g }(startPadLines)
	startPadLines = func() int { return 3 }
	const n, spacing = 26, 4
	for _, tc := range []struct{ sealed, sums bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		sealed := tc.sealed
		t.Run(fmt.Sprintf("sealed %v checksums %v", sealed, tc.sums), func(t *testing.T) {
			if sealed && testing.Short() {
				t.Skip("-short: the open cycle only")
			}
			dir := t.TempDir()
			clk := newClock()
			q := openT(t, dir, Options{IndexSpacing: spacing, Roll: Minutely, clock: clk.Now, BlockSize: 64 << 10, MaxCycleSize: 1 << 20, ChecksumMessages: tc.sums})
			want := map[uint64]string{}
			for i := range n {
				m := msgOf(i)[:4+i%11]
				idx, err := q.Append(m)
				if err != nil {
					t.Fatal(err)
				}
				want[idx] = string(m)
			}
			// Every slot before the last index boundary: the start padding,
			// index arrays, messages. (Damage after it, in the last
			// interval of the index, is past what the index can check.)
			c := q.wcur.Load()
			var offs []int64
			for w := c.walkFrom(0, dataStart); w.seq < n-n%spacing; {
				h, err := w.header()
				if err != nil || h == 0 {
					t.Fatalf("walk: %v", err)
				}
				offs = append(offs, w.off)
				w.step(h)
			}
			path := q.cyclePath(c.num)
			if sealed {
				clk.Advance(time.Minute)
				idx, err := q.Append([]byte("next cycle"))
				if err != nil {
					t.Fatal(err)
				}
				want[idx] = "next cycle"
			}
			q.Close()
			pristine, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damages, phantoms, caught, sameSize := 0, 0, 0, 0
			for i, off := range offs {
				l := uint32(readWord(t, path, off))
				for _, bad := range lengthDamages(l) {
					damages++
					if err := os.WriteFile(path, pristine, 0o644); err != nil {
						t.Fatal(err)
					}
					writeWord(t, path, off, readWord(t, path, off)&^lenMask|uint64(bad))
					got, err := readDamaged(t, dir)
					var bogus []string
					for _, m := range got {
						if w, ok := want[m.idx]; !ok || w != m.msg {
							bogus = append(bogus, fmt.Sprintf("%d:%d %q", m.idx>>32, uint32(m.idx), m.msg))
						}
					}
					if len(bogus) == 0 {
						if errors.Is(err, ErrCorrupt) {
							caught++
						}
						continue
					}
					if tc.sums {
						t.Errorf("slot %d's length %d damaged to %d: a checksummed queue read %d messages never appended (%q), then %v",
							i, l, bad, len(bogus), bogus, err)
						continue
					}
					if slotSize(uint64(bad)) == slotSize(uint64(l)) && len(bogus) == 2 && bogus[0] == bogus[1] {
						// The slot keeps its size: the walk is sound, and only the
						// damaged message itself reads shorter, or longer by its
						// zero padding (read once by each handle). Only a checksum
						// of the message could tell.
						sameSize++
						continue
					}
					phantoms++
					if !errors.Is(err, ErrCorrupt) {
						t.Errorf("slot %d's length %d damaged to %d: read %d messages never appended (%q) and then %v, no ErrCorrupt",
							i, l, bad, len(bogus), bogus, err)
						continue
					}
					caught++
				}
			}
			t.Logf("%d damages: %d change one message's length within its slot; %d make the walk read messages never appended; %d reads end in ErrCorrupt",
				damages, sameSize, phantoms, caught)
		})
	}
}

// lengthDamages returns damaged forms of a slot's length word l.
func lengthDamages(l uint32) []uint32 {
	out := []uint32{0, l + 8, l + 16, l + 64, 2*l + 8, l + 4096, l - 8, l - 1, l + 1}
	for b := 0; b < 20; b++ {
		out = append(out, l^1<<b)
	}
	return out
}

type readMsg struct {
	idx uint64
	msg string
}

// readDamaged reads a damaged queue in dir from the start, in a
// read-only and then a writable handle, until the end or an error, and
// returns what it read and the error (nil at the end). A busy slot (a
// damaged header read as one) is waited for as long as SkipAfter.
func readDamaged(t *testing.T, dir string) ([]readMsg, error) {
	var got []readMsg
	for _, ro := range []bool{true, false} {
		q, err := Open(dir, Options{ReadOnly: ro, SkipAfter: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		tl, _ := q.Tailer()
		err = func() error {
			defer failIfHung(10 * time.Second)()
			for len(got) < 1000 {
				idx, m, err := tl.Next()
				if err == ErrNoMessage && !tl.stalled() {
					return nil // the end
				}
				if err == ErrNoMessage {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
					err = tl.Wait(ctx, Yield)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						return nil
					}
					if err != nil {
						return err
					}
					continue
				}
				if err != nil {
					return err
				}
				got = append(got, readMsg{idx, string(m)})
			}
			return nil
		}()
		q.Close()
		if err != nil {
			return got, err
		}
	}
	return got, nil
}
