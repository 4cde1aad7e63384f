package main

import (
	"bytes"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
)

// crashState edits a sound file into what a writer killed at one step
// leaves (docs/FORMAT.md, "Writers"), with the segment lock owned by the
// dead writer and the version odd, and returns the entries the map must
// hold after recover: every completed write, and the cut-off one either
// done or not, as the format says.
type crashState struct {
	name  string
	apply func(t *testing.T, r *rawMap, want map[string]string) (seg uint32, readBefore map[string]string)
}

var crashStates = []crashState{
	{"insert cut off before its slot", func(t *testing.T, r *rawMap, want map[string]string) (uint32, map[string]string) {
		key, value := []byte("crash-new"), []byte("inserted")
		seg, _, _ := r.hash(key)
		n := r.chunksFor(len(key), len(value))
		c := r.freeRun(t, seg, n)
		for k := c; k < c+n; k++ {
			r.setUsed(seg, k, true)
		}
		r.writeEntry(seg, c, key, value)
		return seg, nil // not done: the key stays absent
	}},
	{"insert cut off after its slot", func(t *testing.T, r *rawMap, want map[string]string) (uint32, map[string]string) {
		key, value := []byte("crash-new"), []byte("inserted")
		seg, home, match := r.hash(key)
		n := r.chunksFor(len(key), len(value))
		c := r.freeRun(t, seg, n)
		for k := c; k < c+n; k++ {
			r.setUsed(seg, k, true)
		}
		r.writeEntry(seg, c, key, value)
		r.setSlot(seg, r.emptySlotFrom(seg, home), match|uint64(c)) // done; counts not updated
		want[string(key)] = string(value)
		return seg, map[string]string{string(key): string(value)}
	}},
	{"in-place update cut off mid-copy", func(t *testing.T, r *rawMap, want map[string]string) (uint32, map[string]string) {
		key := "key-0003" // a 16-byte value
		seg, _, w := r.find(t, key)
		_, old := r.entry(seg, slotChunkOf(w))
		nv := bytes.ToUpper(old)
		r.setScratch(seg, nv)
		r.setHdr(seg, hdrIntent, uint64(slotChunkOf(w))+1) // done
		copy(old[:len(old)/2], nv)                         // the copy was half way
		want[key] = string(nv)
		return seg, map[string]string{key: string(nv)}
	}},
	{"delete cut off mid-shift", func(t *testing.T, r *rawMap, want map[string]string) (uint32, map[string]string) {
		// Slot p holds X; slot p+1 holds Y, displaced from its home: deleting
		// X copies Y back into p, then clears p+1. Cut off between the two.
		for seg := range r.segments {
			for p := range r.slots - 1 {
				x, y := r.slot(seg, p), r.slot(seg, p+1)
				if x == 0 || y == 0 || r.homeOf(y) == p+1 {
					continue
				}
				xk, _ := r.entry(seg, slotChunkOf(x))
				yk, yv := r.entry(seg, slotChunkOf(y))
				r.setSlot(seg, p, y) // done: X is gone
				delete(want, string(xk))
				return seg, map[string]string{string(yk): string(yv)}
			}
		}
		t.Fatal("no displaced entry in the file")
		return 0, nil
	}},
	{"relocation cut off before its slot", func(t *testing.T, r *rawMap, want map[string]string) (uint32, map[string]string) {
		key := "key-0004"
		seg, _, w := r.find(t, key)
		_, old := r.entry(seg, slotChunkOf(w))
		nv := bytes.Repeat([]byte("L"), 100)
		n := r.chunksFor(len(key), len(nv))
		c := r.freeRun(t, seg, n)
		for k := c; k < c+n; k++ {
			r.setUsed(seg, k, true)
		}
		r.writeEntry(seg, c, []byte(key), nv) // not done: the old value stays
		return seg, map[string]string{key: string(old)}
	}},
	{"relocation cut off after its slot", func(t *testing.T, r *rawMap, want map[string]string) (uint32, map[string]string) {
		key := "key-0004"
		seg, i, w := r.find(t, key)
		nv := bytes.Repeat([]byte("L"), 100)
		n := r.chunksFor(len(key), len(nv))
		c := r.freeRun(t, seg, n)
		for k := c; k < c+n; k++ {
			r.setUsed(seg, k, true)
		}
		r.writeEntry(seg, c, []byte(key), nv)
		r.setSlot(seg, i, w&^0xffffffff|uint64(c)) // done; old chunks not yet freed
		want[key] = string(nv)
		return seg, map[string]string{key: string(nv)}
	}},
}

// TestRecoverCrashStates: the deterministic variant of a writer killed
// mid-write. For each step a writer can die after, verify reports the dead
// lock holder, get already reads the completed write, recover repairs, and
// verify then passes with every completed write present.
func TestRecoverCrashStates(t *testing.T) {
	token, pid := deadToken(t)
	for _, cs := range crashStates {
		t.Run(strings.ReplaceAll(cs.name, " ", "_"), func(t *testing.T) {
			path, r, entries := soundFile(t)
			want := maps.Clone(entries)
			seg, readBefore := cs.apply(t, r, want)
			r.setHdr(seg, hdrOwner, token)
			r.setHdr(seg, hdrVersion, r.hdr(seg, hdrVersion)+1)
			r.write(t)

			v := offmapRun(t, nil, "verify", path)
			if v.code != 1 || !strings.Contains(v.stdout, fmt.Sprintf("segment %d: lock held by dead process %d", seg, pid)) {
				t.Fatalf("verify: want the dead holder reported, got %s", v)
			}
			st := ok(t, "stat", path)
			if !strings.Contains(st, fmt.Sprintf("segment %d: held by dead process %d", seg, pid)) {
				t.Errorf("stat does not show the dead holder:\n%s", st)
			}
			// A read-only reader reads the segment as the dead writer left
			// it, completing a redo record.
			for k, v := range readBefore {
				if got := ok(t, "get", "--hex", path, fmt.Sprintf("%x", k)); got != fmt.Sprintf("%x\n", v) {
					t.Errorf("get %q before recover: %q, want %x", k, got, v)
				}
			}

			rec := ok(t, "recover", path)
			if !strings.Contains(rec, fmt.Sprintf("fixed: segment %d: lock held by dead process %d", seg, pid)) {
				t.Errorf("recover did not report the dead holder:\n%s", rec)
			}
			ok(t, "verify", path)
			sameContents(t, contents(t, path), want)
		})
	}
}

// TestRecoverKilledWriter kills a process writing to the map at arbitrary
// instants, then verifies, recovers and verifies again: the map must hold
// exactly the state after some number of the writer's operations, no fewer
// than it had reported complete. It goes on until a kill has caught the
// writer inside a write, holding a segment lock (about every other kill
// does), and at least three kills.
func TestRecoverKilledWriter(t *testing.T) {
	const ops = 100000
	all := writerOps(ops)
	midWrite := 0
	for round := 0; round < 3 || midWrite == 0; round++ {
		if round == 20 {
			t.Fatal("20 kills and none caught the writer holding a lock")
		}
		killAt := 1000 + round*2500
		path := newMap(t, writerEntries, writerAvgKey, writerAvgValue)
		w := startChild(t, "writer", path, fmt.Sprintf("OFFMAP_CLI_TEST_OPS=%d", ops))
		acked := 0
		for w.out.Scan() {
			n, err := strconv.Atoi(w.out.Text())
			if err != nil {
				t.Fatalf("writer said %q", w.out.Text())
			}
			acked = n
			if n >= killAt {
				w.cmd.Process.Kill()
				break
			}
		}
		for w.out.Scan() { // what it reported before it died
			if n, err := strconv.Atoi(w.out.Text()); err == nil {
				acked = n
			}
		}
		w.kill()
		if acked < killAt {
			t.Fatalf("writer stopped after %d operations", acked)
		}

		v := offmapRun(t, nil, "verify", path)
		if v.code == 1 && strings.Contains(v.stdout, fmt.Sprintf("lock held by dead process %d", w.cmd.Process.Pid)) {
			midWrite++
		} else if v.code != 0 {
			t.Fatalf("verify after the kill: %s", v)
		}
		rec := ok(t, "recover", path)
		ok(t, "verify", path)
		done := matchPrefix(t, all, acked, contents(t, path))
		t.Logf("kill %d: %d operations acknowledged, the map holds the state after %d\nverify: %srecover: %s",
			round, acked, done, v.stdout, rec)
	}
}

// matchPrefix returns the j >= acked such that got is the state after the
// first j operations, or fails.
func matchPrefix(t *testing.T, ops []writerOp, acked int, got map[string]string) int {
	t.Helper()
	model := make(map[string]string)
	for _, op := range ops[:acked] {
		op.apply(model)
	}
	same := func(k string) bool {
		mv, mok := model[k]
		gv, gok := got[k]
		return mok == gok && mv == gv
	}
	differ := 0
	for k := range model {
		if !same(k) {
			differ++
		}
	}
	for k := range got {
		if _, ok := model[k]; !ok {
			differ++
		}
	}
	for j := acked; ; j++ {
		if differ == 0 {
			return j
		}
		if j == len(ops) {
			break
		}
		k := ops[j].key
		before := same(k)
		ops[j].apply(model)
		switch after := same(k); {
		case before && !after:
			differ++
		case !before && after:
			differ--
		}
	}
	// Report the differences from the acknowledged state.
	model = make(map[string]string)
	for _, op := range ops[:acked] {
		op.apply(model)
	}
	sameContents(t, got, model)
	t.Fatalf("the map is the state after no operation count >= %d", acked)
	return 0
}

// TestRecoverLiveHolder: a live process holding a segment lock is never
// robbed: recover gives up after --timeout with a clear error. Once the
// holder dies, stat and verify name it dead, and recover takes over.
func TestRecoverLiveHolder(t *testing.T) {
	path := newMap(t, 1000, 8, 16)
	fill(t, path, sampleEntries(100))
	h := startChild(t, "holder", path)
	h.expect(t, "locked")
	pid := h.cmd.Process.Pid

	if st := ok(t, "stat", path); !strings.Contains(st, fmt.Sprintf("held by live process %d", pid)) {
		t.Errorf("stat does not show the live holder:\n%s", st)
	}
	ok(t, "verify", path) // a held lock over an unchanged segment is sound
	fails(t, 2, "lock held by a live process for longer than the lock timeout", "recover", "--timeout", "200ms", path)

	h.kill()
	if st := ok(t, "stat", path); !strings.Contains(st, fmt.Sprintf("held by dead process %d", pid)) {
		t.Errorf("stat does not show the dead holder:\n%s", st)
	}
	v := offmapRun(t, nil, "verify", path)
	if v.code != 1 || !strings.Contains(v.stdout, fmt.Sprintf("lock held by dead process %d", pid)) {
		t.Fatalf("verify: want the dead holder reported, got %s", v)
	}
	ok(t, "recover", path)
	ok(t, "verify", path)
	sameContents(t, contents(t, path), sampleEntries(100))
}

// TestRecoverWhileWriting runs recover while another process writes: it
// takes one segment at a time, and the writer loses nothing.
func TestRecoverWhileWriting(t *testing.T) {
	const ops = 200000
	path := newMap(t, writerEntries, writerAvgKey, writerAvgValue)
	w := startChild(t, "writer", path, fmt.Sprintf("OFFMAP_CLI_TEST_OPS=%d", ops))
	if !w.out.Scan() {
		t.Fatal("writer did not start")
	}
	// The writer goes on until its stdin closes.
	if out := ok(t, "recover", path); !strings.Contains(out, "nothing to repair") {
		t.Errorf("recover of a sound map in use: %q", out)
	}
	ok(t, "verify", path)
	w.stdin.Close()
	final := -1
	for w.out.Scan() {
		final, _ = strconv.Atoi(w.out.Text())
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	ok(t, "verify", path)
	if done := matchPrefix(t, writerOps(ops), final, contents(t, path)); done != final {
		t.Fatalf("writer finished after %d operations; the map holds the state after %d", final, done)
	}
}

func TestRecoverErrors(t *testing.T) {
	fails(t, 2, "no such file", "recover", t.TempDir()+"/missing.map")
	fails(t, 2, "wrong number of arguments", "recover")
	path := newMap(t, 100, 8, 8)
	fails(t, 2, "--timeout must be positive", "recover", "--timeout", "0s", path)
	if out := ok(t, "recover", path); !strings.Contains(out, "nothing to repair") {
		t.Errorf("recover of a sound map: %q", out)
	}
}
