package offmap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// crashed is what a simulated crash panics with.
type crashed struct{}

// runUntilCrash runs op with a crash injected at the nth arrival at step.
// It reports whether the crash happened.
func runUntilCrash(step string, nth int, op func()) (hit bool) {
	n := 0
	crashPoint = func(s string) {
		if s == step {
			if n++; n == nth {
				panic(crashed{})
			}
		}
	}
	defer func() {
		crashPoint = nil
		if r := recover(); r != nil {
			if _, ok := r.(crashed); !ok {
				panic(r)
			}
			hit = true
		}
	}()
	op()
	return false
}

// TestCrashAtEveryStep stops a writer at each step of each write protocol,
// as if its process died there holding the segment lock, and checks that
// (1) a read-only reader meanwhile sees the value the repair will produce,
// (2) the next writer takes the lock over and repairs the segment, and
// (3) the operation happened completely or not at all, with nothing else
// lost and a clean Check.
func TestCrashAtEveryStep(t *testing.T) {
	short := []byte("old-value-1234567")  // 17 bytes: 4 chunks with a 9-byte key
	same := []byte("new-value-7654321")   // same size: rewritten in place
	long := bytes.Repeat([]byte("L"), 90) // needs more chunks: relocated
	shrunk := []byte("tiny-but-not-8")    // fewer chunks: in place, tail freed
	type tc struct {
		name, step string
		nth        int
		op         func(m *Map)
		key        []byte
		before     []byte // value before; nil: absent
		after      []byte // value if the op completed; nil: absent
		completes  bool   // whether the crash at this step leaves the op done
	}
	var k []byte
	put := func(v []byte) func(m *Map) { return func(m *Map) { m.Put(k, v) } }
	del := func(m *Map) { m.Delete(k) }
	cases := []tc{
		{"insert/alloc", "insert.alloc", 1, put(short), k, nil, short, false},
		{"insert/entry", "insert.entry", 1, put(short), k, nil, short, false},
		{"insert/slot", "insert.slot", 1, put(short), k, nil, short, true},
		{"relocate/entry", "relocate.entry", 1, put(long), k, short, long, false},
		{"relocate/slot", "relocate.slot", 1, put(long), k, short, long, true},
		{"redo/scratch", "redo.scratch", 1, put(same), k, short, same, false},
		{"redo/intent", "redo.intent", 1, put(same), k, short, same, true},
		{"redo/length", "redo.length", 1, put(same), k, short, same, true},
		{"redo/applied", "redo.applied", 1, put(same), k, short, same, true},
		{"shrink/intent", "redo.intent", 1, put(shrunk), k, long, shrunk, true},
		{"shrink/freed", "redo.freed", 1, put(shrunk), k, long, shrunk, true},
		{"delete/first shift", "delete.shift", 1, del, k, short, nil, true},
		{"delete/second shift", "delete.shift", 2, del, k, short, nil, true},
		{"delete/unlinked", "delete.unlinked", 1, del, k, short, nil, true},
		// With ChecksumEntries a one-word update takes the redo record too.
		{"word/scratch", "redo.scratch", 1, put([]byte("12345678")), k, []byte("abcdefgh"), []byte("12345678"), false},
		{"word/intent", "redo.intent", 1, put([]byte("12345678")), k, []byte("abcdefgh"), []byte("12345678"), true},
	}
	// Every step without checksums; every other one, and the one-word
	// update's, with them.
	for i, c := range cases {
		word := strings.HasPrefix(c.name, "word/")
		for _, sums := range []bool{false, true} {
			if sums && !word && i%2 == 1 || !sums && word {
				continue
			}
			k = []byte("the-key-x")
			c.key = k
			t.Run(fmt.Sprintf("%s/checksums=%v", c.name, sums), func(t *testing.T) {
				crashStep(t, c.step, c.nth, func(m *Map) { c.op(m) }, &k, c.before, c.after, c.completes, sums)
			})
		}
	}
}

// crashStep runs one case of TestCrashAtEveryStep: *k is the key the
// operation op works on (the cases' closures read it).
func crashStep(t *testing.T, step string, nth int, op func(m *Map), k *[]byte, before, after []byte, completes, sums bool) {
	c := struct {
		step      string
		nth       int
		op        func(m *Map)
		key       []byte
		before    []byte
		after     []byte
		completes bool
	}{step, nth, op, *k, before, after, completes}
	p := tempPath(t)
	// One segment, nearly full: probe clusters are long, so deletes shift.
	m, err := Open(p, Options{Entries: 120, AverageKeySize: 9, AverageValueSize: 17, MaxValueSize: 100, Segments: 1,
		LockTimeout: 10 * time.Second, ChecksumEntries: sums})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	others := map[string]string{}
	for i := range 110 {
		kk := fmt.Appendf(nil, "other-%03d", i)
		mustPut(t, m, kk, val(i))
		others[string(kk)] = string(val(i))
	}
	if c.step == "delete.shift" {
		// An older key sits inside its probe cluster: deleting
		// it moves later entries back.
		*k = keyThatShifts(t, m, c.nth)
		c.key = *k
		delete(others, string(*k))
	}
	if c.before != nil {
		mustPut(t, m, c.key, c.before)
	}
	if !runUntilCrash(c.step, c.nth, func() { c.op(m) }) {
		t.Fatalf("step %s #%d not reached", c.step, c.nth)
	}
	m.abandon(c.key)
	if err := m.Check(); err == nil || !strings.Contains(err.Error(), "dead process") {
		t.Fatalf("Check before repair: %v", err)
	}

	want := c.before
	if c.completes {
		want = c.after
	}
	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ro.Get(c.key)
	checkOutcome(t, "read-only reader", got, err, want)
	// Several keys at one instant, and every entry, the same.
	var viewed []byte
	err = ro.ViewKeys([][]byte{c.key, []byte("other-000")}, func(v [][]byte, found []bool) {
		if found[0] {
			viewed = append([]byte{}, v[0]...)
		} else {
			viewed = nil
		}
	})
	if viewed == nil && err == nil {
		err = ErrNotFound
	}
	checkOutcome(t, "read-only ViewKeys", viewed, err, want)
	var ranged []byte
	err = ro.Range(func(k, v []byte) bool {
		if string(k) == string(c.key) {
			ranged = append([]byte{}, v...)
		}
		return true
	})
	if ranged == nil && err == nil {
		err = ErrNotFound
	}
	checkOutcome(t, "read-only Range", ranged, err, want)
	ro.Close()

	// The next writer takes the lock over and repairs.
	if err := m.Put([]byte("after-crash"), []byte("x")); err != nil {
		t.Fatalf("Put after the crash: %v", err)
	}
	got, err = m.Get(c.key)
	checkOutcome(t, "after repair", got, err, want)
	for kk, v := range others {
		mustGet(t, m, []byte(kk), v)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	wantLen := len(others) + 1
	if want != nil {
		wantLen++
	}
	if m.Len() != wantLen {
		t.Fatalf("Len = %d, want %d", m.Len(), wantLen)
	}
}

func checkOutcome(t *testing.T, who string, got []byte, err error, want []byte) {
	t.Helper()
	switch {
	case want == nil && !errors.Is(err, ErrNotFound):
		t.Fatalf("%s: key holds %q (%v), want it absent", who, got, err)
	case want != nil && (err != nil || !bytes.Equal(got, want)):
		t.Fatalf("%s: key holds %q (%v), want %q", who, got, err, want)
	}
}

func init() {
	children["hold-lock"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		m.lockKey([]byte(os.Getenv("KEY")))
		fmt.Println("locked")
		time.Sleep(time.Hour) // die holding the lock, killed by the test
		return nil
	}
}

// TestDeadLockHolder kills a process that holds a segment lock: the next
// writer must take the lock over (within about a second, far below the
// lock timeout) instead of waiting for a live holder.
func TestDeadLockHolder(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8, LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	mustPut(t, m, []byte("k"), []byte("before"))
	cmd := child(t, "hold-lock", "MAP="+p, "KEY=k")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		cmd.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	if holder := m.Stats().PerSegment[m.hash([]byte("k")).seg].LockHolder; holder != cmd.Process.Pid {
		t.Fatalf("lock holder %d, child is %d", holder, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	start := time.Now()
	if err := m.Put([]byte("k"), []byte("after")); err != nil {
		t.Fatalf("Put after the holder died: %v", err)
	}
	mustGet(t, m, []byte("k"), "after")
	t.Logf("took the lock over after %v", time.Since(start))
}

// TestLiveHolderTimesOut: a live holder is never robbed; the waiter gets
// ErrLockTimeout when its timeout passes.
func TestLiveHolderTimesOut(t *testing.T) {
	m := openTest(t, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8, LockTimeout: 300 * time.Millisecond})
	unlock := m.lockKey([]byte("k"))
	done := make(chan error)
	go func() { done <- m.Put([]byte("k"), []byte("v")) }()
	err := <-done
	unlock()
	if !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("Put while a live goroutine holds the lock: %v", err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
}

// keyThatShifts returns a key in the map whose delete moves at least n
// later entries back (backward-shift deletion).
func keyThatShifts(t *testing.T, m *Map, n int) []byte {
	sv := m.segment(0)
	s := &sv
	for i := range 110 {
		k := fmt.Appendf(nil, "other-%03d", i)
		pos, _, _, found, _ := m.find(s, k, m.hash(k))
		if !found {
			t.Fatalf("%s not found", k)
		}
		copySlots := make(localSlots, len(s.slots))
		for j := range s.slots {
			copySlots[j] = s.slots[j].Load()
		}
		stores := 0
		removeSlot(countingSlots{localSlots: copySlots, stores: &stores}, pos)
		if stores-1 >= n { // the last store empties the final hole
			return k
		}
	}
	t.Fatalf("no key shifts %d entries on delete", n)
	return nil
}

type countingSlots struct {
	localSlots
	stores *int
}

func (c countingSlots) Store(i uint32, w uint64) { *c.stores++; c.localSlots.Store(i, w) }

// A read-only check of a segment whose writer is part way through a
// write must not report what the write has done so far as damage: chunks
// allocated for an insert whose slot is not stored yet, or the spare
// chunks of a shrunk value not freed yet, are not leaks.
func TestCheckDuringWrite(t *testing.T) {
	key := []byte("in-flight")
	for _, c := range []struct {
		step          string
		before, value []byte
	}{
		{"insert.alloc", nil, []byte("value")},
		{"redo.applied", bytes.Repeat([]byte("v"), 60), []byte("short")},
	} {
		t.Run(c.step, func(t *testing.T) {
			path := tempPath(t)
			m, err := Open(path, small)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if c.before != nil {
				mustPut(t, m, key, c.before)
			}
			ro, err := Open(path, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			paused, resume := make(chan struct{}), make(chan struct{})
			crashPoint = func(s string) {
				if s == c.step {
					close(paused)
					<-resume
				}
			}
			done := make(chan error, 1)
			go func() { done <- m.Put(key, c.value) }()
			<-paused
			problems, err := ro.CheckSegment(int(m.hash(key).seg))
			close(resume)
			putErr := <-done
			crashPoint = nil
			// The check is either made or given up (ErrLockTimeout), never
			// a claim of damage.
			if err != nil && !errors.Is(err, ErrLockTimeout) || putErr != nil {
				t.Fatal(err, putErr)
			}
			if len(problems) != 0 {
				t.Fatalf("check during a write: %q", problems)
			}
			if err := ro.Check(); err != nil {
				t.Fatalf("check after the write: %v", err)
			}
		})
	}
}

// TestCrashDuringGrowth stops a writer at each step of each kind of
// growth, as if its process died there holding the segment lock: the key
// being inserted is absent, everything before it is present (to a
// read-only reader meanwhile, and after the next writer's repair), Check
// is clean, and the map goes on growing.
func TestCrashDuringGrowth(t *testing.T) {
	for _, c := range []struct {
		step      string
		valueSize int // small values fill the slot table first, large ones the entry space
	}{
		{"grow.claimed", 8}, {"grow.table.copying", 8}, {"grow.table.filled", 8}, {"grow.table.published", 8},
		{"grow.claimed", 200}, {"grow.extent.cleared", 200}, {"grow.extent.published", 200},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.step, c.valueSize), func(t *testing.T) {
			p := tempPath(t)
			m, err := Open(p, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 16, MaxValueSize: 256,
				Segments: 1, LockTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			n := 0
			if !runUntilCrash(c.step, 1, func() {
				for ; ; n++ {
					mustPut(t, m, key(n), bigValue(n, c.valueSize))
				}
			}) {
				t.Fatalf("step %s not reached", c.step)
			}
			m.abandon(key(n))
			if c.valueSize == 8 && m.Stats().PerSegment[0].Extents != 1 ||
				c.valueSize == 200 && m.Stats().TablesGrown != 0 {
				t.Fatalf("the crash hit the other kind of growth: %+v", m.Stats())
			}

			ro, err := Open(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			mustMiss(t, ro, key(n))
			for i := range n {
				mustGet(t, ro, key(i), string(bigValue(i, c.valueSize)))
			}
			ro.Close()

			mustPut(t, m, key(n), bigValue(n, c.valueSize)) // takes the lock over
			for i := range n + 1 {
				mustGet(t, m, key(i), string(bigValue(i, c.valueSize)))
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			for i := n + 1; i < n+2000; i++ {
				mustPut(t, m, key(i), bigValue(i, c.valueSize))
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			if m.Len() != n+2000 {
				t.Fatalf("Len = %d, want %d", m.Len(), n+2000)
			}
		})
	}
}

// TestCrashDuringReuse stops a writer as it takes a freed table for its
// growth and as it gives one back, as if its process died there holding
// the segment lock: the key being inserted is absent, everything before
// it is present, the space in its hands is lost but no other segment's,
// Check is clean, and the map goes on growing and reusing.
func TestCrashDuringReuse(t *testing.T) {
	for _, step := range []string{"grow.reuse.taken", "grow.free.merging"} {
		t.Run(step, func(t *testing.T) {
			p := tempPath(t)
			m, err := Open(p, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Segments: 4, LockTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			n := 0
			if !runUntilCrash(step, 1, func() {
				for ; ; n++ {
					mustPut(t, m, key(n), bigValue(n, 8))
				}
			}) {
				t.Fatalf("step %s not reached", step)
			}
			m.abandon(key(n))
			ro, err := Open(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			mustMiss(t, ro, key(n))
			for i := range n {
				mustGet(t, ro, key(i), string(bigValue(i, 8)))
			}
			ro.Close()
			reused := m.Stats().Reused
			for i := n; i < n+5000; i++ {
				mustPut(t, m, key(i), bigValue(i, 8))
			}
			for i := range n + 5000 {
				mustGet(t, m, key(i), string(bigValue(i, 8)))
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			if st := m.Stats(); m.Len() != n+5000 || st.Reused <= reused {
				t.Fatalf("Len = %d, want %d; reused %d then %d", m.Len(), n+5000, reused, st.Reused)
			}
		})
	}
}

// TestCrashTablesCoverEveryStep: every crash step in the code is in one of
// the tables above (or, for BackupTo's, in TestBackupKilled's), so that a
// new step cannot go untested.
func TestCrashTablesCoverEveryStep(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("crash_test.go")
	if err != nil {
		t.Fatal(err)
	}
	// TestBackupKilled kills a backup at each of its steps.
	backups, err := os.ReadFile("backup_test.go")
	if err != nil {
		t.Fatal(err)
	}
	tests = append(tests, backups...)
	re := regexp.MustCompile(`crash\("([a-z.]+)"\)`)
	steps := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			steps++
			if !bytes.Contains(tests, []byte(`"`+string(m[1])+`"`)) {
				t.Errorf("%s: crash step %q is in no crash test table", f, m[1])
			}
		}
	}
	if steps < 15 {
		t.Fatalf("found only %d crash steps", steps)
	}
}

// TestCrashInUpdateKeys stops an UpdateKeys at each step of its
// transaction (txn.go), as if its process died there holding the locks of
// three segments, and checks that all of its changes are made or none,
// whichever segment is repaired first and however: by a reader that reads
// them all at once, by a writer of the last segment, or by the next open
// of the file. The transaction moves money between two accounts, inserts
// a key and deletes one, in three segments.
func TestCrashInUpdateKeys(t *testing.T) {
	steps := []struct {
		step      string
		nth       int
		completes bool
	}{
		{"tx.entries", 1, false},
		{"tx.prepared", 1, false}, {"tx.prepared", 2, false}, {"tx.prepared", 3, false},
		{"tx.committed", 1, true},
		{"tx.change", 1, true}, {"tx.change", 2, true}, {"tx.change", 3, true}, {"tx.change", 4, true},
		{"tx.part", 1, true}, {"tx.part", 2, true}, {"tx.part", 3, true},
	}
	for _, c := range steps {
		for _, repair := range []string{"view", "last-first", "reopen", "read-only"} {
			t.Run(fmt.Sprintf("%s#%d/%s", c.step, c.nth, repair), func(t *testing.T) {
				crashUpdateKeys(t, c.step, c.nth, c.completes, repair)
			})
		}
	}
}

func crashUpdateKeys(t *testing.T, step string, nth int, completes bool, repair string) {
	p := tempPath(t)
	opts := Options{Entries: 1000, AverageKeySize: 10, AverageValueSize: 8, Segments: 8, LockTimeout: 10 * time.Second}
	m, err := Open(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m.Close() }()
	for i := range 40 {
		mustPut(t, m, account(i), le(1000))
	}
	// Two accounts, a key to insert and one to delete, in three segments.
	a, b := account(0), []byte(nil)
	for i := 1; b == nil; i++ {
		if m.hash(account(i)).seg != m.hash(a).seg {
			b = account(i)
		}
	}
	var ins, del []byte
	for i := 0; ins == nil || del == nil; i++ {
		k := fmt.Appendf(nil, "key-%d", i)
		if s := m.hash(k).seg; s != m.hash(a).seg && s != m.hash(b).seg {
			if ins == nil {
				ins = k
			} else if m.hash(k).seg == m.hash(ins).seg {
				del = k
			}
		}
	}
	mustPut(t, m, del, []byte("to be deleted"))
	keys := [][]byte{a, b, ins, del}
	tx := func() {
		m.UpdateKeys(keys, func(v [][]byte, found []bool) ([][]byte, []Op) {
			return [][]byte{le(balance(v[0]) - 100), le(balance(v[1]) + 100), []byte("inserted"), nil},
				[]Op{OpPut, OpPut, OpPut, OpDelete}
		})
	}
	if !runUntilCrash(step, nth, tx) {
		t.Fatalf("step %s #%d not reached", step, nth)
	}
	// The simulated crash unwound through UpdateKeys' deferred unlocks:
	// give every segment to a dead holder, as a real crash leaves them.
	for _, k := range keys {
		m.abandon(k)
	}
	if err := m.Check(); err == nil {
		t.Fatal("Check found nothing after a crash inside UpdateKeys")
	}

	want := [][]byte{le(1000), le(1000), nil, []byte("to be deleted")}
	if completes {
		want = [][]byte{le(900), le(1100), []byte("inserted"), nil}
	}
	switch repair {
	case "view":
	case "last-first":
		// A writer of the last segment repairs it first: it must learn
		// the outcome from the first one, which is repaired after.
		last := keys[0]
		for _, k := range keys {
			if m.hash(k).seg > m.hash(last).seg {
				last = k
			}
		}
		err := m.Update(last, func([]byte, bool) ([]byte, Op) { return nil, OpNone })
		if err != nil {
			t.Fatal(err)
		}
	case "reopen":
		m.Close()
		if m, err = Open(p, opts); err != nil {
			t.Fatal(err)
		}
	case "read-only":
		// A read-only process cannot repair: it reads the segments as the
		// dead writer left them, through the transaction's records, and
		// sees all of it or none, by ViewKeys and by Get alike. (The
		// writer then repairs below, as in "view".)
		ro, err := Open(p, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		waits := staleWaits.Load()
		err = ro.ViewKeys(keys, func(v [][]byte, found []bool) {
			for i := range keys {
				if got := v[i]; !bytes.Equal(got, want[i]) || found[i] != (want[i] != nil) {
					t.Errorf("read-only ViewKeys: %s = %q (found %v), want %q", keys[i], got, found[i], want[i])
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 1000 {
			k := keys[j%len(keys)]
			got, err := ro.Get(k)
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if want := want[j%len(keys)]; !bytes.Equal(got, want) {
				t.Fatalf("read-only Get: %s = %q, want %q", k, got, want)
			}
			// One dead writer: it costs one wait for its verdict, not
			// one per read of its segments.
			if n := staleWaits.Load() - waits; n > 1 {
				t.Fatalf("read-only Gets waited %d times for one dead writer by Get %d, want at most once", n, j+1)
			}
		}
		seen := map[string]string{}
		if err := ro.Range(func(k, v []byte) bool { seen[string(k)] = string(v); return true }); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 41 {
			t.Errorf("read-only Range saw %d entries, want 41", len(seen))
		}
		for i, k := range keys {
			if v, ok := seen[string(k)]; ok != (want[i] != nil) || v != string(want[i]) {
				t.Errorf("read-only Range: %s = %q (present %v), want %q", k, v, ok, want[i])
			}
		}
		ro.Close()
	}
	err = m.ViewKeys(keys, func(v [][]byte, found []bool) {
		for i := range keys {
			got := v[i]
			if !found[i] {
				got = nil
			}
			if !bytes.Equal(got, want[i]) {
				t.Errorf("%s = %q, want %q", keys[i], got, want[i])
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	wantLen := 41
	if m.Len() != wantLen {
		t.Fatalf("Len = %d, want %d", m.Len(), wantLen)
	}
	for i := 1; i < 40; i++ {
		if k := account(i); !bytes.Equal(k, b) {
			mustGet(t, m, k, string(le(1000)))
		}
	}
	// The map goes on: the same transaction again.
	tx()
	if v, err := m.Get(a); err != nil || balance(v) != balance(want[0])-100 {
		t.Fatalf("after a second transfer, %s = %v (%v)", a, v, err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashInUpdateKeysOtherSegmentBusy: the repair of a committed
// transaction's first segment must lock the others before it forgets the
// commit; while one of them stays held by a live process, writers of the
// first segment get ErrLockTimeout, and once it is free the transaction
// completes everywhere.
func TestCrashInUpdateKeysOtherSegmentBusy(t *testing.T) {
	m, err := Open(tempPath(t), Options{Entries: 1000, AverageKeySize: 10, AverageValueSize: 8, Segments: 8,
		LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, b := account(0), []byte(nil)
	for i := 1; b == nil; i++ {
		if m.hash(account(i)).seg > m.hash(a).seg {
			b = account(i)
		} else if m.hash(account(i)).seg < m.hash(a).seg {
			a, b = account(i), a
		}
	}
	mustPut(t, m, a, le(1000))
	mustPut(t, m, b, le(1000))
	keys := [][]byte{a, b}
	if !runUntilCrash("tx.committed", 1, func() {
		m.UpdateKeys(keys, func(v [][]byte, _ []bool) ([][]byte, []Op) {
			return [][]byte{le(balance(v[0]) - 1), le(balance(v[1]) + 1)}, []Op{OpPut, OpPut}
		})
	}) {
		t.Fatal("the commit was not reached")
	}
	// (The simulated crash unwound through UpdateKeys' deferred unlocks.)
	m.abandon(a) // the first segment's holder is dead,
	if !m.segmentOf(b).hdr.lock.TryLock(m.witness.Token()) {
		t.Fatal("b's segment is locked")
	} // b's is this live process
	err = m.Put(a, le(5))
	if !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("Put in the first segment while the other is held: %v, want ErrLockTimeout", err)
	}
	m.abandon(b)
	err = m.ViewKeys(keys, func(v [][]byte, found []bool) {
		if !found[0] || !found[1] || balance(v[0]) != 999 || balance(v[1]) != 1001 {
			t.Errorf("after the repair: %v %v, want 999 and 1001", v, found)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashInEviction stops a Put at each step of the eviction it needs,
// as if its process died there holding the segment lock: the next writer
// repairs the segment, Check is clean, every key but the one being
// evicted keeps its value, and the map goes on evicting.
func TestCrashInEviction(t *testing.T) {
	for _, c := range []struct {
		step string
		nth  int
	}{
		{"evict.popped", 1},    // key 0, read twice, before it moves to the main FIFO
		{"evict.pushed", 1},    // key 0 pushed to the main FIFO, its tail not yet moved
		{"evict.popped", 2},    // key 1, the victim
		{"delete.unlinked", 1}, // key 1 unlinked, its chunks not yet freed
		{"evict.deleted", 1},   // key 1 deleted, the counters not yet raised
		{"insert.slot", 1},     // the new key stored after the eviction
		{"evict.pushed", 2},    // the new key's item written, the tail not moved
	} {
		t.Run(fmt.Sprintf("%s#%d", c.step, c.nth), func(t *testing.T) {
			p := tempPath(t)
			m, err := Open(p, Options{Entries: 100, AverageKeySize: 9, AverageValueSize: 16, Segments: 1, Evict: true, LockTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for i := range 100 {
				mustPut(t, m, key(i), val(i))
			}
			for range 2 {
				mustGet(t, m, key(0), string(val(0)))
			}
			newKey := []byte("the-new-key")
			if !runUntilCrash(c.step, c.nth, func() { m.Put(newKey, []byte("new")) }) {
				t.Fatalf("step %s #%d not reached", c.step, c.nth)
			}
			m.abandon(newKey)
			ro, err := Open(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				if v, err := ro.Get(key(i)); err == nil && string(v) != string(val(i)) || err != nil && !errors.Is(err, ErrNotFound) {
					t.Fatalf("read-only reader, key %d: %q, %v", i, v, err)
				}
			}
			ro.Close()
			if err := m.Put([]byte("after-crash"), []byte("x")); err != nil {
				t.Fatalf("Put after the crash: %v", err)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			// At most two keys are gone: the victim of the Put that died,
			// and of the one after it (the map was full). Never key 0,
			// which was read twice.
			var missing []int
			for i := range 100 {
				v, err := m.Get(key(i))
				switch {
				case errors.Is(err, ErrNotFound):
					missing = append(missing, i)
				case err != nil || string(v) != string(val(i)):
					t.Errorf("key %d: %q, %v", i, v, err)
				}
			}
			if len(missing) > 2 || len(missing) > 0 && missing[0] == 0 {
				t.Errorf("keys missing after the crash and one more Put: %v", missing)
			}
			if v, err := m.Get(newKey); err == nil && string(v) != "new" || err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("the new key: %q, %v", v, err)
			}
			for i := range 1000 {
				mustPut(t, m, key(1000+i), val(i))
			}
			if n := m.Len(); n > 100 {
				t.Fatalf("%d entries, bound 100", n)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
