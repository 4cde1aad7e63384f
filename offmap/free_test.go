package offmap

import (
	"cmp"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/offmap/offmap/internal/shm"
)

// growBoth fills two maps made alike, one with the reuse of freed tables
// turned off in this process, with the same n entries.
func growBoth(t *testing.T, n int) (reusing, plain *Map) {
	opts := Options{Entries: 1000, AverageKeySize: 16, AverageValueSize: 8}
	for i, reuse := range []bool{true, false} {
		m, err := Open(tempPath(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		m.reuse = reuse
		for j := range n {
			mustPut(t, m, key(j), bigValue(j, 8))
		}
		if i == 0 {
			reusing = m
		} else {
			plain = m
		}
	}
	return reusing, plain
}

// TestReuseShrinksGrownFile: a map grown 50 times over takes the tables
// its segments grew out of for later growth, and its file ends smaller
// than that of the same map that does not, with the same entries.
func TestReuseShrinksGrownFile(t *testing.T) {
	const n = 52_000
	m, plain := growBoth(t, n)
	st, ps := m.Stats(), plain.Stats()
	if st.Reused == 0 || ps.Reused != 0 || st.FileSize >= ps.FileSize || st.UnusedBytes >= ps.UnusedBytes ||
		st.ReusableBytes > st.UnusedBytes {
		t.Fatalf("reusing: %d steps reused, file %d, unused %d (reusable %d), %d tables grown; not: %d steps, file %d, unused %d, %d tables",
			st.Reused, st.FileSize, st.UnusedBytes, st.ReusableBytes, st.TablesGrown, ps.Reused, ps.FileSize, ps.UnusedBytes, ps.TablesGrown)
	}
	t.Logf("file %d bytes reusing freed tables, %d without (%d steps reused space; %d bytes unused, %d of them reusable)",
		st.FileSize, ps.FileSize, st.Reused, st.UnusedBytes, st.ReusableBytes)
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mustGet(t, m, key(i), string(bigValue(i, 8)))
	}
	// And after a restart: the free words are in the file.
	p := m.path
	m.Close()
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	if got := m.Stats().ReusableBytes; got != st.ReusableBytes {
		t.Fatalf("reusable bytes %d after reopening, %d before", got, st.ReusableBytes)
	}
	for i := range n {
		mustGet(t, m, key(i), string(bigValue(i, 8)))
	}
}

// TestEvictingMapsDoNotReuse: an evicting map's readers count accesses in
// slots without the lock, so its file does not take the reuse of freed
// tables (its tables do not grow today: a segment holds at most its
// first table's entries), and a header that says both is refused.
func TestEvictingMapsDoNotReuse(t *testing.T) {
	m, err := Open(tempPath(t), Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Evict: true, MaxFileSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	if m.hdr.EntryFlags&flagReuse != 0 {
		t.Fatalf("entry flags %#x", m.hdr.EntryFlags)
	}
	for i := range 20_000 {
		mustPut(t, m, key(i), bigValue(i, 8))
	}
	st := m.Stats()
	if st.Reused != 0 || st.ReusableBytes != 0 {
		t.Fatalf("%d steps reused space, %d bytes reusable", st.Reused, st.ReusableBytes)
	}
	for i := range freeWordCount {
		if w := m.freeWords()[i].Load(); w != 0 {
			t.Fatalf("free word %d is %#x", i, w)
		}
	}
	b := validFile(t)
	flags := binary.LittleEndian.Uint32(b[144:])
	if flags&flagReuse == 0 {
		t.Fatalf("a map that does not evict has entry flags %#x", flags)
	}
	binary.LittleEndian.PutUint32(b[144:], flags|flagEvict)
	reseal(b)
	if _, err := Open(writeFile(t, b), Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a header that evicts and reuses: %v, want ErrCorrupt", err)
	}
}

// TestFreeWordDamage: a free word that names space a segment uses, space
// outside the growth area, or space another free word names is reported
// by Check; growth never hands such space out; Recover clears the word,
// and nothing stored is lost.
func TestFreeWordDamage(t *testing.T) {
	for _, c := range []struct {
		name, want string
		word       func(m *Map) uint64
	}{
		{"over a table", "overlaps the segment", func(m *Map) uint64 {
			off, n := tableAt(m.segment(0).hdr.table.Load())
			return freeWord(off, shm.Pad(8*n, 64))
		}},
		{"before the growth area", "outside the file's growth area", func(m *Map) uint64 {
			return freeWord(int(m.hdr.SegmentsOff), 1<<16)
		}},
		{"past the end of the file", "outside the file's growth area", func(m *Map) uint64 {
			return freeWord(int(m.growth().allocEnd.Load()), 1<<16)
		}},
		{"over another free region", "overlaps another free region", func(m *Map) uint64 {
			for i := range freeWordCount {
				if w := m.freeWords()[i].Load(); w != 0 {
					return w
				}
			}
			panic("no free region")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := tempPath(t)
			m, err := Open(p, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Segments: 4})
			if err != nil {
				t.Fatal(err)
			}
			const n = 3000
			for i := range n {
				mustPut(t, m, key(i), bigValue(i, 8))
			}
			if m.Stats().ReusableBytes == 0 {
				t.Fatal("nothing freed")
			}
			defer closeChecked(t, m)
			// Into the last free word, by another writer of the file while
			// the map is open (a process that opens it clears such a word).
			bad := c.word(m)
			damage := func() {
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], bad)
				f, err := os.OpenFile(p, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteAt(b[:], freeWordsEnd-8); err != nil {
					t.Fatal(err)
				}
			}
			damage()
			if ps := checkProblems(t, m); len(ps) != 1 || !hasProblem(ps, "free word 127") || !hasProblem(ps, c.want) {
				t.Fatalf("Check found %q, want free word 127 %s", ps, c.want)
			}
			fixed, err := m.Recover()
			if err != nil {
				t.Fatal(err)
			}
			if !hasProblem(fixed, "free word 127") || m.freeWords()[freeWordCount-1].Load() != 0 {
				t.Fatalf("Recover: %q", fixed)
			}
			// Growth goes on around it (and may drop the word).
			damage()
			for i := n; i < 4*n; i++ {
				mustPut(t, m, key(i), bigValue(i, 8))
			}
			for i := range 4 * n {
				mustGet(t, m, key(i), string(bigValue(i, 8)))
			}
			if _, err := m.Recover(); err != nil {
				t.Fatal(err)
			}
			if ps := checkProblems(t, m); ps != nil {
				t.Fatalf("Check after Recover found %q", ps)
			}
			for i := range 4 * n {
				mustGet(t, m, key(i), string(bigValue(i, 8)))
			}
		})
	}
}

// TestCheckWhileReusing: Check, read-only and writable, and readers that
// take no lock, while writers grow every segment and reuse each other's
// freed tables: Check never sees a table in two places, readers find
// every value written before they look.
func TestCheckWhileReusing(t *testing.T) {
	p := tempPath(t)
	w, err := Open(p, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Segments: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, w)
	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	n := 40_000
	if testing.Short() {
		n = 10_000
	}
	const writers = 2
	var written atomic.Int64 // keys [0, written) are all in
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failure error
	fail := func(err error) {
		mu.Lock()
		failure = cmp.Or(failure, err)
		mu.Unlock()
	}
	var next atomic.Int64
	var done atomic.Bool
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := w.Put(key(i), bigValue(i, 8)); err != nil {
					fail(err)
					return
				}
				// Keys finish out of order: count the prefix that is in.
				for written.Load() == int64(i) && written.CompareAndSwap(int64(i), int64(i+1)) {
				}
			}
		}()
	}
	var checks sync.WaitGroup
	for _, m := range []*Map{w, ro} {
		checks.Add(1)
		go func() {
			defer checks.Done()
			for !done.Load() {
				if err := m.Check(); err != nil && !errors.Is(err, ErrLockTimeout) {
					fail(err)
					return
				}
				if ps, err := m.CheckFile(); err != nil || ps != nil {
					fail(errors.Join(err, errors.New(joinProblems(ps))))
					return
				}
			}
		}()
	}
	checks.Add(1)
	go func() {
		defer checks.Done()
		for j := 0; !done.Load(); j++ {
			upTo := int(written.Load())
			if upTo == 0 {
				continue
			}
			i := j * 7919 % upTo
			v, err := ro.Get(key(i))
			if err != nil || string(v) != string(bigValue(i, 8)) {
				fail(errors.Join(err, errors.New("key "+string(key(i))+" read "+string(v))))
				return
			}
		}
	}()
	wg.Wait()
	done.Store(true)
	checks.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	if st := w.Stats(); st.Reused == 0 || w.Len() != n {
		t.Fatalf("%d steps reused space, Len %d", st.Reused, w.Len())
	}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
}

func joinProblems(ps []string) string {
	s := ""
	for _, p := range ps {
		s += p + "; "
	}
	return s
}

// TestCheckSeesTableMoveOnce: a segment grows out of its table between
// Check's reads of the segment headers and of the free words, so that the
// first names the table and the second finds it free: Check reads both
// again and reports nothing.
func TestCheckSeesTableMoveOnce(t *testing.T) {
	m, err := Open(tempPath(t), Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Segments: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	n := 0
	for ; m.Stats().TablesGrown < 1; n++ {
		mustPut(t, m, key(n), bigValue(n, 8))
	}
	grown := 0
	betweenLooks = func() {
		betweenLooks = nil
		for tables := m.Stats().TablesGrown; m.Stats().TablesGrown == tables; n++ {
			mustPut(t, m, key(n), bigValue(n, 8))
		}
		grown++
	}
	defer func() { betweenLooks = nil }()
	// The free words' check alone: CheckFile would also look again for
	// the file's new size.
	if ps := m.freeWordProblems(m.storedSize(), false); ps != nil || grown != 1 {
		t.Fatalf("Check of the free words: %q (grew %d times between its looks)", ps, grown)
	}
	if st := m.Stats(); st.ReusableBytes == 0 {
		t.Fatalf("the table grown out of was not freed: %+v", st)
	}
}

// TestOpenClearsBadFreeWord: a writable open of a map other processes
// have open clears a free word that names space outside the growth area,
// and its Recover says so.
func TestOpenClearsBadFreeWord(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Segments: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	m.freeWords()[3].Store(freeWord(int(m.hdr.SegmentsOff), 1<<16))
	other, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, other)
	if w := m.freeWords()[3].Load(); w != 0 {
		t.Fatalf("free word 3 is %#x after the open", w)
	}
	if fixed, err := other.Recover(); err != nil || len(fixed) != 1 || !hasProblem(fixed, "free word 3") {
		t.Fatalf("Recover: %q, %v", fixed, err)
	}
}

// freeTail grows a map with freed tables, then claims a region past
// everything its segments name and frees it: the free words then name
// space at the end of the claimed space, as when the last table grown
// took a freed region and left the one at the end behind.
func freeTail(t *testing.T, p string) (m *Map, off, n int) {
	m, err := Open(p, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Segments: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		mustPut(t, m, key(i), bigValue(i, 8))
	}
	// Larger than every free region: claimed at AllocEnd.
	n = shm.Pad(int(m.Stats().ReusableBytes)+4096, 64)
	off, err = m.claim(n)
	if err != nil {
		t.Fatal(err)
	}
	if end := int(m.growth().allocEnd.Load()); off+n != end {
		t.Fatalf("claimed [%d, %d), AllocEnd %d", off, off+n, end)
	}
	m.putFree(off, n)
	return m, off, n
}

// TestAllocEndDamageKeepsFreeSpace: damage to AllocEnd, which no
// checksum covers, never lets a claim hand out space a free word names.
// While AllocEnd is bad nothing is taken from the free words; Recover
// moves it past the free regions as past the tables (or raises it past a
// free region it was lowered below), so the free space stays reusable and
// growth goes on with every entry intact.
func TestAllocEndDamageKeepsFreeSpace(t *testing.T) {
	for _, c := range []struct {
		name, want string
		end        func(m *Map, tail int) uint64
		takes      bool // whether growth goes on before Recover
	}{
		{"past MaxFileSize", "the claimed space ends at", func(m *Map, _ int) uint64 { return uint64(m.limit) + 64 }, false},
		{"not aligned", "the claimed space ends at", func(m *Map, tail int) uint64 { return uint64(tail) + 8 }, false},
		{"below a free region", "lies past the claimed space", func(m *Map, tail int) uint64 { return uint64(tail) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, off, n := freeTail(t, tempPath(t))
			defer closeChecked(t, m)
			before, reusable := m.Stats(), m.reusableBytes() // (Stats bounds it by AllocEnd)
			m.growth().allocEnd.Store(c.end(m, off))
			if ps := checkProblems(t, m); len(ps) != 1 || !hasProblem(ps, c.want) {
				t.Fatalf("Check found %q, want one: %s", ps, c.want)
			}
			i, failed := 3000, -1
			if !c.takes {
				// Until a growth step: it fails, and takes nothing.
				var err error
				for ; err == nil && i < 20_000; i++ {
					err = m.Put(key(i), bigValue(i, 8))
				}
				failed = i - 1
				st := m.Stats()
				if !errors.Is(err, ErrCorrupt) || st.Reused != before.Reused || m.reusableBytes() != reusable {
					t.Fatalf("growth with AllocEnd bad: %v; reused %d -> %d, reusable %d -> %d",
						err, before.Reused, st.Reused, reusable, m.reusableBytes())
				}
				// The growth descriptors' repair alone, Recover's first
				// step: a claim by another process may come before the free
				// words are checked, so it must already leave the free tail
				// claimed.
				p, _ := m.checkGrowth(m.fileEnd(), true)
				if end := int(m.growth().allocEnd.Load()); !hasProblem(p, c.want) || end < off+n {
					t.Fatalf("AllocEnd repaired to %d, free tail [%d, %d): %q", end, off, off+n, p)
				}
			}
			fixed, err := m.Recover()
			if err != nil || c.takes && !hasProblem(fixed, c.want) {
				t.Fatalf("Recover: %q, %v", fixed, err)
			}
			if end := int(m.growth().allocEnd.Load()); end < off+n || m.reusableBytes() != reusable {
				t.Fatalf("after Recover AllocEnd %d, free tail [%d, %d); reusable %d, was %d",
					end, off, off+n, m.reusableBytes(), reusable)
			}
			if ps := checkProblems(t, m); ps != nil {
				t.Fatalf("Check after Recover found %q", ps)
			}
			for ; i < 12_000; i++ {
				mustPut(t, m, key(i), bigValue(i, 8))
			}
			if st := m.Stats(); st.Reused <= before.Reused {
				t.Fatalf("growth after Recover reused nothing: %+v", st)
			}
			for j := range i {
				if j != failed {
					mustGet(t, m, key(j), string(bigValue(j, 8)))
				}
			}
			if ps := checkProblems(t, m); ps != nil {
				t.Fatalf("Check after growing on found %q", ps)
			}
		})
	}
}

// TestFreedTailCut: a file cut short under the map, losing only freed
// space at its end, loses nothing stored. A take of that space gives it
// storage before writing there (never a SIGBUS); Check reports a free
// word past the end of the file, and Recover clears it.
func TestFreedTailCut(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to cut a file that is mapped")
	}
	p := tempPath(t)
	m, off, n := freeTail(t, p)
	defer closeChecked(t, m)
	if err := os.Truncate(p, int64(off)); err != nil {
		t.Fatal(err)
	}
	got, ok := m.takeFree(n)
	if !ok || got != off {
		t.Fatalf("take of %d bytes: %d, %v; want the cut tail at %d", n, got, ok, off)
	}
	if st, err := os.Stat(p); err != nil || st.Size() < int64(off+n) {
		t.Fatalf("the taken tail [%d, %d) has no storage: %v, %v", off, off+n, st.Size(), err)
	}
	if i := slices.IndexFunc(m.current()[off:off+n], nonZero); i >= 0 {
		t.Fatalf("taken space not zero at %d", off+i)
	}
	m.putFree(got, n)
	if ps := checkProblems(t, m); ps != nil {
		t.Fatalf("Check found %q", ps)
	}
	// Cut again, and Check before any take.
	if err := os.Truncate(p, int64(off)); err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Check: %v, want ErrTruncated", err)
	}
	if ps, err := m.CheckFile(); err != nil || !hasProblem(ps, "outside the file's growth area") {
		t.Fatalf("CheckFile found %q, %v; want the free word past the end of the file", ps, err)
	}
	fixed, err := m.Recover()
	if err != nil || !hasProblem(fixed, "outside the file's growth area") || !hasProblem(fixed, "truncated while in use, past every table and extent") {
		t.Fatalf("Recover: %q, %v", fixed, err)
	}
	if hasProblem(fixed, "given storage again") { // else no fallocate: growth gives it storage
		if ps := checkProblems(t, m); ps != nil {
			t.Fatalf("Check after Recover found %q", ps)
		}
	}
	for i := 3000; i < 10_000; i++ {
		mustPut(t, m, key(i), bigValue(i, 8))
	}
	for i := range 10_000 {
		mustGet(t, m, key(i), string(bigValue(i, 8)))
	}
	if _, err := m.Recover(); err != nil {
		t.Fatal(err)
	}
	if ps := checkProblems(t, m); ps != nil {
		t.Fatalf("Check after growing on found %q", ps)
	}
}

// TestRecoverWhileGrowing: Recover on a sound map that another goroutine
// grows (taking freed tables and claiming new space) all the while finds
// nothing to fix, writes over nothing, and every entry stays.
func TestRecoverWhileGrowing(t *testing.T) {
	m, err := Open(tempPath(t), Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 8, Segments: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	const n = 25_000
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := m.Put(key(i), bigValue(i, 8)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	recovers := 0
	for running := true; running; recovers++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		fixed, err := m.Recover()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fixed {
			if !strings.Contains(f, "check again") {
				t.Fatalf("Recover %d of a sound map found %q", recovers, fixed)
			}
		}
	}
	if st := m.Stats(); st.Reused == 0 {
		t.Fatalf("no growth step reused a freed table: %+v", st)
	}
	t.Logf("%d Recovers while the map grew", recovers)
	for i := range n {
		mustGet(t, m, key(i), string(bigValue(i, 8)))
	}
	if ps := checkProblems(t, m); ps != nil {
		t.Fatalf("Check found %q", ps)
	}
}
