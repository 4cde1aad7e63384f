package queue

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Damage to the cycle header's words outside its checksum (the next-cycle
// word and the write hint) is detected, reported or repaired; it never
// hides messages silently or fails every append.

// makeCycles makes a queue in dir with per messages in each of n cycles
// (msgOf(0), msgOf(1), ... in order) and returns the cycle files in order.
func makeCycles(t *testing.T, dir string, n, per int, msg func(int) []byte) []string {
	t.Helper()
	clk := newClock()
	q, err := Open(dir, Options{Roll: Minutely, clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for c := range n {
		for i := range per {
			if _, err := q.Append(msg(c*per + i)); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Minute)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"+cycleSuffix))
	slices.Sort(files)
	if len(files) != n {
		t.Fatalf("%d cycle files, want %d", len(files), n)
	}
	return files
}

func readWord(t *testing.T, path string, off int64) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

func writeWord(t *testing.T, path string, off int64, v uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, v), off); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedNextWord(t *testing.T) {
	for _, tc := range []struct {
		name string
		next func(cycles []uint64) uint64 // the damaged word of the first cycle
	}{
		{"skips a cycle", func(c []uint64) uint64 { return c[2] + 1 }},
		{"names a cycle far ahead", func(c []uint64) uint64 { return c[2] + 100 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := makeCycles(t, dir, 3, 10, msgOf)
			var nums []uint64
			for _, f := range files {
				nums = append(nums, readWord(t, f, 16))
			}
			if got := readWord(t, files[0], nextOff); got != nums[1]+1 {
				t.Fatalf("next word of the first cycle is %d, want %d", got, nums[1]+1)
			}
			writeWord(t, files[0], nextOff, tc.next(nums))
			for _, ro := range []bool{false, true} {
				n, err := readThrough(dir, ro)
				if n != 10 || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ReadOnly: %v: read %d messages, then %v; want 10 and ErrCorrupt", ro, n, err)
				}
			}
		})
	}
}

// zeros is a message of zero bytes: a hint pointing into it finds what
// looks like a free slot.
func zeros(int) []byte { return make([]byte, 64) }

func TestDamagedHint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cycle int                               // which cycle's hint
		hint  func(firstMsg, size int64) uint64 // the damaged hint
	}{
		{"old cycle, inside a message", 0, func(m, _ int64) uint64 { return packHint(1, m+8+16) }},
		{"old cycle, past the end of the file", 0, func(_, size int64) uint64 { return packHint(5, size+4096) }},
		{"old cycle, behind its end", 0, func(m, _ int64) uint64 { return packHint(7, m) }},
		{"latest cycle, inside a message", 1, func(m, _ int64) uint64 { return packHint(1, m+8+16) }},
		{"latest cycle, past the end of the file", 1, func(_, size int64) uint64 { return packHint(3, size+4096) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := makeCycles(t, dir, 2, 10, zeros)
			path := files[tc.cycle]
			pad := readWord(t, path, dataStart) & lenMask
			st, _ := os.Stat(path)
			writeWord(t, path, hintOff, tc.hint(dataStart+slotSize(pad), st.Size()))

			var mu sync.Mutex
			repaired := map[int]bool{}
			q := openT(t, dir, Options{OnCycle: func(e CycleEvent) {
				if e.Kind == CycleHintRepaired {
					mu.Lock()
					repaired[slices.Index(files, e.Path)] = true
					mu.Unlock()
				}
			}})
			last, err := q.Append([]byte("after the damage"))
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			tl := tailerT(t, q)
			for i := range 20 {
				_, m, err := tl.Next()
				if err != nil || string(m) != string(zeros(i)) {
					t.Fatalf("message %d: %x, %v", i, m, err)
				}
			}
			if idx, m, err := tl.Next(); err != nil || idx != last || string(m) != "after the damage" {
				t.Fatalf("last message: %#x %q %v, want %#x", idx, m, err, last)
			}
			mu.Lock()
			defer mu.Unlock()
			if !repaired[tc.cycle] {
				t.Fatalf("no CycleHintRepaired event for cycle file %d (events for %v)", tc.cycle, repaired)
			}
		})
	}
}

// TestCheck damages one thing at a time and expects Check to name it, and
// on a sound queue to report exactly the indexes a dead writer lost.
func TestCheck(t *testing.T) {
	t.Run("sound, with a dead writer's slots", func(t *testing.T) {
		q := openT(t, t.TempDir(), Options{SkipAfter: time.Millisecond})
		q.Append([]byte("before"))
		c := q.wcur.Load()
		dead := uint64(200)<<leaseShift | uint64(7)<<genShift
		for range 2 {
			if _, _, _, err := c.claim(10, flagBusy, dead); err != nil {
				t.Fatal(err)
			}
		}
		last, _ := q.Append([]byte("after"))
		lost, err := q.Check()
		want := []IndexRange{{Index(c.num, 1), Index(c.num, 3)}}
		if err != nil || !slices.Equal(lost, want) {
			t.Fatalf("Check: lost %v, %v; want %v and no error", lost, err, want)
		}
		// Once readers have skipped the slots they are lost all the same.
		tl := tailerT(t, q)
		for deadline := time.Now().Add(20 * time.Second); tl.Index() <= last; {
			if _, _, err := tl.Next(); err != nil && err != ErrNoMessage {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("the reader never passed the dead writer's slots")
			}
		}
		if lost, err := q.Check(); err != nil || !slices.Equal(lost, want) {
			t.Fatalf("Check after the skip: lost %v, %v; want %v", lost, err, want)
		}
	})

	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, files []string)
		want   string
	}{
		{"hint past the end", func(t *testing.T, _ string, f []string) {
			writeWord(t, f[0], hintOff, packHint(99, 60000))
		}, "write hint 99:60000"},
		{"hint inside a message", func(t *testing.T, _ string, f []string) {
			pad := readWord(t, f[1], dataStart) & lenMask
			writeWord(t, f[1], hintOff, packHint(1, dataStart+slotSize(pad)+16))
		}, "is not a slot boundary"},
		{"index entry", func(t *testing.T, _ string, f []string) {
			arr := int64(readWord(t, f[0], l1Off))
			writeWord(t, f[0], arr, readWord(t, f[0], arr)+8)
		}, "index entry for message 0"},
		{"level-1 index", func(t *testing.T, _ string, f []string) {
			writeWord(t, f[2], l1Off+8, dataStart+8)
		}, "level-1 index entry 1"},
		{"next word", func(t *testing.T, _ string, f []string) {
			writeWord(t, f[0], nextOff, readWord(t, f[2], 16)+1)
		}, "as its next, but the file after it"},
		{"a middle cycle deleted", func(t *testing.T, _ string, f []string) {
			os.Remove(f[1])
		}, "as its previous, but the file before it"},
		{"the latest cycle deleted", func(t *testing.T, _ string, f []string) {
			os.Remove(f[2])
		}, "has no file"},
		{"writer lease", func(t *testing.T, dir string, _ []string) {
			writeWord(t, filepath.Join(dir, metaName), leaseTableOff+16*3, 12345)
		}, "writer lease 3 has generation 0"},
		{"named tailer", func(t *testing.T, dir string, f []string) {
			meta := filepath.Join(dir, metaName)
			writeWord(t, meta, tailerTableOff+16, uint64('x'))
			writeWord(t, meta, tailerTableOff+8, Index(uint32(readWord(t, f[2], 16))+5, 0)+1)
			writeWord(t, meta, tailerTableOff, 1)
		}, `named tailer "x" acknowledged`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := makeCycles(t, dir, 3, 10, msgOf)
			tc.damage(t, dir, files)
			q, err := Open(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			_, err = q.Check()
			var ce *CheckError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Check: %v, want a CheckError", err)
			}
			found := false
			for _, p := range ce.Problems {
				found = found || strings.Contains(p, tc.want)
			}
			if !found {
				t.Fatalf("Check found %q, want a problem containing %q", ce.Problems, tc.want)
			}
		})
	}
}

// TestCheckWhileRolling runs Check over and over, through a second
// handle, while appenders in this process roll the queue every 100 ms
// and retention deletes old cycles: a sound queue never gets a problem.
func TestCheckWhileRolling(t *testing.T) {
	dir := t.TempDir()
	var rolls atomic.Int32
	q := openT(t, dir, Options{Roll: Fast, KeepCycles: 3, OnCycle: func(e CycleEvent) {
		if e.Kind == CycleRolled {
			rolls.Add(1)
		}
	}})
	checker := openT(t, dir, Options{ReadOnly: true})
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			for i := 0; rolls.Load() < 8; i++ {
				if _, err := q.Append(writerMsg(buf, w, i)); err != nil {
					t.Error(err)
					return
				}
				if i%100 == 99 {
					time.Sleep(100 * time.Microsecond) // a steady stream, not a flood
				}
			}
		}()
	}
	go func() { wg.Wait(); done.Store(true) }()
	checks := 0
	for !done.Load() || checks == 0 {
		if _, err := checker.Check(); err != nil {
			t.Fatalf("Check %d while appending: %v", checks, err)
		}
		checks++
	}
	wg.Wait()
	cs, _ := q.Cycles()
	t.Logf("%d checks over %d rolls; %d cycle files at the end", checks, rolls.Load(), len(cs))
}
