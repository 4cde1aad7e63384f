package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// FuzzCycleFile writes arbitrary bytes as a queue's only cycle file, then
// reads, seeks, appends and takes statistics: any outcome but a panic, a
// fault or a hang is fine.
func FuzzCycleFile(f *testing.F) {
	seedDir := f.TempDir()
	// The seeds are the same every run: the shortest start padding.
	defer func(g func() int) { startPadLines = g }(startPadLines)
	startPadLines = func() int { return 1 }
	q, err := Open(seedDir, Options{IndexSpacing: 1, BlockSize: 16 << 10, MaxCycleSize: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		q.Append(msgOf(i)[:i%13])
	}
	w, _ := q.Reserve(5) // a busy slot
	cs, _ := q.Cycles()
	seed, _ := os.ReadFile(q.cyclePath(cs[0]))
	w.Commit()
	q.Close()
	f.Add(seed[:16<<10])
	f.Add(seed[:dataStart+64])
	f.Add(seed[:100])
	bad := append([]byte(nil), seed[:16<<10]...)
	binary.LittleEndian.PutUint64(bad[hintOff:], packHint(5, 1<<30))
	binary.LittleEndian.PutUint64(bad[l1Off:], 12345)
	f.Add(bad)
	// Offsets whose sum with a length wraps past the largest int64.
	wraps := append([]byte(nil), seed[:16<<10]...)
	binary.LittleEndian.PutUint64(wraps[l1Off:], 1<<63-8)
	f.Add(wraps)
	if arr := binary.LittleEndian.Uint64(seed[l1Off:]); arr != 0 && arr+8 <= 16<<10 {
		wraps = append([]byte(nil), seed[:16<<10]...)
		binary.LittleEndian.PutUint64(wraps[arr+8:], 1<<63-8) // the index entry of message 1
		f.Add(wraps)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			return
		}
		defer failIfHung(5 * time.Second)()
		dir := t.TempDir()
		q, err := Open(dir, Options{IndexSpacing: 1, BlockSize: 16 << 10, MaxCycleSize: 64 << 10, SkipAfter: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		name := q.cycleName(0)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		q.bumpLatest(0)
		tl, _ := q.Tailer()
		for i := 0; i < 1000; i++ {
			if _, _, err := tl.Next(); err != nil {
				break
			}
		}
		for _, s := range []uint32{0, 1, 3, 17, 1 << 20} {
			tl.Seek(Index(0, s))
			tl.HasNext()
		}
		tl.SeekEnd()
		q.Append([]byte("fuzz"))
		q.Stats()
		q.Check()
		tl.SeekStart()
		tl.Drain(1000, func(uint64, []byte) bool { return true })
	})
}

// failIfHung crashes the process, with every goroutine's stack, unless the
// returned function is called within d: a file that makes the queue hang
// must fail the fuzzer, which otherwise waits on it forever.
func failIfHung(d time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(d):
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("hung for %v:\n%s", d, buf[:runtime.Stack(buf, true)]))
		}
	}()
	return func() { close(done) }
}

// FuzzOperations drives a queue with a sequence of appends, reservations
// committed or aborted, rolls, seeks and deletions decoded from the
// input, and checks every read and index against a model: a list of
// cycles, each a list of slots (a message, or nil for an aborted one).
// At the end Check must find nothing wrong and report exactly the aborted
// slots as lost.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 5, 0, 7, 2, 0, 3, 1, 0, 3, 4, 1, 5, 1, 6, 0})
	f.Add([]byte{1, 3, 2, 0, 1, 4, 3, 2, 1, 1, 4, 0, 4, 9, 6, 0, 5, 0})
	f.Add([]byte{3, 0, 3, 0, 0, 1, 3, 5, 0, 2, 5, 2, 4, 3, 6, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 400 {
			return
		}
		defer failIfHung(10 * time.Second)()
		clk := newClock()
		q, err := Open(t.TempDir(), Options{Roll: Minutely, clock: clk.Now, IndexSpacing: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		type cycleModel struct {
			num   uint32
			slots [][]byte // nil: aborted
		}
		var model []*cycleModel
		current := func() *cycleModel {
			n := q.cycleOf(clk.Now())
			if len(model) == 0 || model[len(model)-1].num != n {
				model = append(model, &cycleModel{num: n})
			}
			return model[len(model)-1]
		}
		// want returns the first message at or after idx in the model.
		want := func(idx uint64) (uint64, []byte, bool) {
			for _, c := range model {
				for s, m := range c.slots {
					if i := Index(c.num, uint32(s)); i >= idx && m != nil {
						return i, m, true
					}
				}
			}
			return 0, nil, false
		}
		tl := tailerT(t, q)
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%7, int(ops[i+1])
			msg := fmt.Appendf(nil, "m%d-%s", i, make([]byte, arg%40))
			switch op {
			case 0, 1: // Append, or Reserve and Commit
				c := current()
				var idx uint64
				var err error
				if op == 0 {
					idx, err = q.Append(msg)
				} else {
					var w Writing
					if w, err = q.Reserve(len(msg)); err == nil {
						copy(w.Bytes(), msg)
						idx, err = w.Commit()
					}
				}
				if err != nil || idx != Index(c.num, uint32(len(c.slots))) {
					t.Fatalf("op %d: append: %#x %v, want %#x", i, idx, err, Index(c.num, uint32(len(c.slots))))
				}
				c.slots = append(c.slots, msg)
			case 2: // Reserve and Abort
				c := current()
				w, err := q.Reserve(len(msg))
				if err != nil || w.Index() != Index(c.num, uint32(len(c.slots))) {
					t.Fatalf("op %d: reserve: %v", i, err)
				}
				w.Abort()
				c.slots = append(c.slots, nil)
			case 3: // the clock moves on: the next append rolls
				clk.Advance(time.Duration(arg%3) * time.Minute)
			case 4: // Seek to a slot of the model (or past the end)
				var idx uint64
				if len(model) > 0 {
					c := model[arg%len(model)]
					idx = Index(c.num, uint32(arg%(len(c.slots)+1)))
				}
				if err := tl.Seek(idx); err != nil {
					if len(model) == 0 && errors.Is(err, ErrNotFound) {
						continue
					}
					t.Fatalf("op %d: seek %#x: %v", i, idx, err)
				}
				got, m, err := tl.Next()
				wi, wm, ok := want(idx)
				if !ok && err != ErrNoMessage || ok && (err != nil || got != wi || string(m) != string(wm)) {
					t.Fatalf("op %d: after seek %#x: %#x %q %v, want %#x %q", i, idx, got, m, err, wi, wm)
				}
			case 5: // DeleteCycles
				keep := arg%3 + 1
				deleted, err := q.DeleteCycles(keep, false)
				if err != nil {
					t.Fatal(err)
				}
				var wantDeleted []uint32
				for len(model) > keep {
					wantDeleted = append(wantDeleted, model[0].num)
					model = model[1:]
				}
				if !slices.Equal(deleted, wantDeleted) {
					t.Fatalf("op %d: DeleteCycles(%d) deleted %v, want %v", i, keep, deleted, wantDeleted)
				}
			case 6: // read everything from the start
				r := tailerT(t, q)
				next := uint64(0)
				for {
					got, m, err := r.Next()
					wi, wm, ok := want(next)
					if !ok {
						if err != ErrNoMessage {
							t.Fatalf("op %d: read past the model's end: %#x %q %v", i, got, m, err)
						}
						break
					}
					if err != nil || got != wi || string(m) != string(wm) {
						t.Fatalf("op %d: read %#x %q %v, want %#x %q", i, got, m, err, wi, wm)
					}
					next = got + 1
				}
				r.Close()
			}
		}
		lost, err := q.Check()
		if err != nil {
			t.Fatal(err)
		}
		var wantLost []IndexRange
		for _, c := range model {
			for s, m := range c.slots {
				if m != nil {
					continue
				}
				idx := Index(c.num, uint32(s))
				if k := len(wantLost); k > 0 && wantLost[k-1].To == idx {
					wantLost[k-1].To++
				} else {
					wantLost = append(wantLost, IndexRange{idx, idx + 1})
				}
			}
		}
		if !slices.Equal(lost, wantLost) {
			t.Fatalf("Check: lost %v, want %v", lost, wantLost)
		}
	})
}

// FuzzMeta writes arbitrary bytes as queue.meta beside a sound cycle
// file, then opens the queue read-only and takes statistics, reads from
// the start and through every named tailer, seeks to the end and checks;
// then, the lock word cleared (a live holder is waited for, by design),
// opens it for writing and appends, adds and acknowledges a named tailer.
// Any outcome but a panic, a fault or a hang is fine. With fixSum the
// header's checksum is recomputed, so that its fields get past it.
func FuzzMeta(f *testing.F) {
	seedDir := f.TempDir()
	q, err := Open(seedDir, Options{IndexSpacing: 1, BlockSize: 16 << 10, MaxCycleSize: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 10 {
		q.Append(msgOf(i))
	}
	nt, _ := q.NamedTailer("audit")
	nt.Next()
	nt.Ack()
	cs, _ := q.Cycles()
	cycleName := q.cycleName(cs[0])
	cycle, _ := os.ReadFile(q.cyclePath(cs[0]))
	q.Close()
	seed, err := os.ReadFile(filepath.Join(seedDir, metaName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, false)
	with := func(off int, v uint64) []byte {
		b := slices.Clone(seed)
		binary.LittleEndian.PutUint64(b[off:], v)
		return b
	}
	for _, v := range []uint64{1<<64 - 1, 1<<63 | 5, 49, 1 << 32} {
		f.Add(with(tailerTableOff, v), false) // the named tailer's name length
	}
	f.Add(with(tailerTableOff+8, 1<<64-1), false)    // its acknowledged index
	f.Add(with(metaLatestOff, 1<<64-1), false)       // the latest cycle
	f.Add(with(metaLatestOff, uint64(cs[0])), false) // one behind
	f.Add(with(leaseTableOff+8, 1<<64-1), false)     // a lease's generation
	f.Add(with(metaSleepersOff, 1<<32-1), false)     // sleepers and doorbell
	f.Add(with(40, 1<<40), true)                     // maximum cycle size, checksum fixed
	f.Add(seed[:300], false)
	f.Fuzz(func(t *testing.T, meta []byte, fixSum bool) {
		if len(meta) > 2*metaSize {
			return
		}
		defer failIfHung(5 * time.Second)()
		meta = slices.Clone(meta)
		if fixSum && len(meta) >= metaChecksumOff+8 {
			binary.LittleEndian.PutUint64(meta[metaChecksumOff:], xxhash.Sum64(meta[:metaChecksumOff]))
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, cycleName), cycle, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, metaName), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if q, err := Open(dir, Options{ReadOnly: true, SkipAfter: 1}); err == nil {
			st, _ := q.Stats()
			tl, _ := q.Tailer()
			tl.Drain(1000, func(uint64, []byte) bool { return true })
			tl.SeekEnd()
			tl.HasNext()
			for _, ts := range st.Tailers {
				if ts.Err == nil {
					if nt, err := q.NamedTailer(ts.Name); err == nil {
						nt.Drain(1000, func(uint64, []byte) bool { return true })
					}
				}
			}
			q.NamedTailer("audit")
			q.Check()
			q.Close()
		}
		if len(meta) >= metaLockOff+16 {
			clear(meta[metaLockOff : metaLockOff+16])
			os.WriteFile(filepath.Join(dir, metaName), meta, 0o644)
		}
		q, err := Open(dir, Options{SkipAfter: 1})
		if err != nil {
			return
		}
		defer q.Close()
		q.Append([]byte("fuzz"))
		if nt, err := q.NamedTailer("audit"); err == nil {
			nt.Next()
			nt.Ack()
		}
		if nt, err := q.NamedTailer("new"); err == nil {
			nt.Next()
			nt.Ack()
		}
		q.Stats()
		q.Check()
		q.DeleteTailer("audit")
	})
}
