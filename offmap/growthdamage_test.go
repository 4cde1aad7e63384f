package offmap

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/offmap/offmap/internal/testfs"
)

// grownTwoSegments returns a closed map file of two segments that both
// grew (segment 1 to at least three extents), and the entries it holds.
func grownTwoSegments(t *testing.T) (string, map[string]string) {
	t.Helper()
	p := tempPath(t)
	m, err := Open(p, Options{Entries: 200, AverageKeySize: 11, AverageValueSize: 16, MaxValueSize: 256, Segments: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i < 20_000; i++ {
		k, v := key(i), bigValue(i, 24+i%40)
		mustPut(t, m, k, v)
		want[string(k)] = string(v)
		if i > 1000 && m.segment(0).hdr.extents[0].Load() != 0 && m.segment(1).hdr.extents[2].Load() != 0 {
			break
		}
	}
	if m.segment(0).hdr.extents[0].Load() == 0 || m.segment(1).hdr.extents[2].Load() == 0 {
		t.Fatalf("the map did not grow enough: %+v", m.Stats().PerSegment)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return p, want
}

// readAll checks that m holds exactly want.
func readAll(t *testing.T, m *Map, want map[string]string) {
	t.Helper()
	bad := 0
	for k, v := range want {
		got, err := m.Get([]byte(k))
		if err != nil || string(got) != v {
			if bad++; bad <= 3 {
				t.Errorf("Get(%s) = %q, %v; want %q", k, got, err, v)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d entries read wrong", bad, len(want))
	}
	if m.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", m.Len(), len(want))
	}
}

// damageExtentIntoOther points segment 1's extent 3 into segment 0's
// extent 1 and leaves segment 1 as a writer that died there would.
func damageExtentIntoOther(t *testing.T, m *Map) {
	t.Helper()
	s0, s1 := m.segment(0), m.segment(1)
	s1.hdr.extents[2].Store(s0.hdr.extents[0].Load() + 64)
	s1.hdr.lock.ForceUnlock(s1.hdr.lock.Owner())
	s1.hdr.lock.TryLock(deadToken)
	s1.hdr.version.Add(1)
}

// TestRepairAloneChecksDescriptorsFirst: a dead writer's segment whose
// extent word points into another segment's extent. Opening the map
// alone must not let the dead writer's repair rebuild a bitmap over the
// other segment's entries: Open refuses the file, touching nothing, and
// Recover drops the damaged extent before it repairs the segment.
func TestRepairAloneChecksDescriptorsFirst(t *testing.T) {
	p, want := grownTwoSegments(t)
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The entries of segment 1's extent 3 (and after) are lost with it.
	lost := 0
	for k := range want {
		if m.inExtent([]byte(k), 1, 3) {
			delete(want, k)
			lost++
		}
	}
	damageExtentIntoOther(t, m)
	m.Close()
	before, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}

	if m, err := Open(p, Options{}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			m.Close()
		}
		t.Fatalf("Open of a map whose extents overlap: %v, want ErrCorrupt", err)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Fatal("a refused Open changed the file")
	}

	m, err = Open(p, Options{OpenDamaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	fixed, err := m.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(fixed, "segment 1: extent 3") {
		t.Fatalf("Recover did not say it dropped segment 1's extent 3: %q", fixed)
	}
	readAll(t, m, want)
	t.Logf("%d entries of the damaged extent lost; %d kept", lost, len(want))
}

// TestRepairLeavesOtherSegmentsRegions: the same damage met by a running
// process that takes the dead writer's lock over: its repair drops the
// extent that overlaps another segment's instead of writing a bitmap
// into it.
func TestRepairLeavesOtherSegmentsRegions(t *testing.T) {
	p, want := grownTwoSegments(t)
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	var seg1Key []byte
	for k := range want {
		if m.inExtent([]byte(k), 1, 3) {
			delete(want, k)
		} else if m.hash([]byte(k)).seg == 1 {
			seg1Key = []byte(k)
		}
	}
	damageExtentIntoOther(t, m)
	// A write to segment 1 takes the lock over and repairs.
	mustPut(t, m, seg1Key, []byte("after the repair"))
	want[string(seg1Key)] = "after the repair"
	readAll(t, m, want)
}

// inExtent reports whether key lives in extent k or later of segment seg.
func (m *Map) inExtent(key []byte, seg uint32, k int) bool {
	h := m.hash(key)
	s := m.segment(h.seg)
	_, w, _, found, _ := m.find(&s, key, h)
	if !found || h.seg != seg {
		return false
	}
	kk, _ := m.extentOf(slotChunk(w))
	return kk >= k
}

// regionEnds returns, per segment, the end of its furthest grown table or
// extent, read from the closed map file at p.
func regionEnds(t *testing.T, p string) []int {
	t.Helper()
	m, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ends := make([]int, m.hdr.Segments)
	for _, r := range m.grownRegions() {
		ends[r.seg] = max(ends[r.seg], r.end)
	}
	return ends
}

// TestOpenTruncatedGrowth cuts a grown map at every page boundary of its
// growth area. Where the cut takes a table or an extent that a segment
// records, every Open (writable or not) is ErrTruncated and leaves the
// file as it is; Recover drops what was cut and says so, with an error;
// every entry of the other segments stays. Where it takes only unused
// space, the map opens with every entry.
func TestOpenTruncatedGrowth(t *testing.T) {
	p, want := grownTwoSegments(t)
	// Space claimed and given storage past the last region, by a process
	// that died before it published it: cutting only that loses nothing.
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.claim(3 * os.Getpagesize()); err != nil {
		t.Fatal(err)
	}
	m.Close()
	img, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	ends := regionEnds(t, p)
	m, err = Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	start, segOf := int(m.hdr.FileSize), map[string]uint32{}
	for k := range want {
		segOf[k] = m.hash([]byte(k)).seg
	}
	m.Close()
	page := os.Getpagesize()
	points, refused := 0, 0
	for cut := start + page; cut < len(img); cut += page {
		points++
		cp := tempPath(t)
		if err := os.WriteFile(cp, img[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		var kept []uint32
		for seg, end := range ends {
			if end <= cut {
				kept = append(kept, uint32(seg))
			}
		}
		if len(kept) == len(ends) {
			m, err := Open(cp, Options{})
			if err != nil {
				t.Fatalf("cut at %d, past every recorded region: %v", cut, err)
			}
			readAll(t, m, want)
			m.Close()
			continue
		}
		refused++
		for _, ro := range []bool{false, true} {
			if m, err := Open(cp, Options{ReadOnly: ro}); !errors.Is(err, ErrTruncated) {
				if err == nil {
					m.Close()
				}
				t.Fatalf("cut at %d (regions end at %v), read-only %v: Open: %v, want ErrTruncated", cut, ends, ro, err)
			}
		}
		if st, err := os.Stat(cp); err != nil || st.Size() != int64(cut) {
			t.Fatalf("cut at %d: a refused Open changed the file's size: %v, %v", cut, st.Size(), err)
		}
		m, err := Open(cp, Options{OpenDamaged: true})
		if err != nil {
			t.Fatal(err)
		}
		fixed, err := m.Recover()
		if !errors.Is(err, ErrTruncated) || !hasProblem(fixed, "past the end of the file") {
			t.Fatalf("cut at %d: Recover: %q, %v; want what it dropped and ErrTruncated", cut, fixed, err)
		}
		if fixed, err := m.Recover(); err != nil {
			t.Fatalf("cut at %d: second Recover: %q, %v", cut, fixed, err)
		}
		if err := m.Check(); err != nil {
			t.Fatalf("cut at %d: Check after Recover: %v", cut, err)
		}
		for k, v := range want {
			if slicesContains(kept, segOf[k]) {
				mustGet(t, m, []byte(k), v)
			}
		}
		m.Close()
		if m, err := Open(cp, Options{}); err != nil {
			t.Fatalf("cut at %d: Open after Recover: %v", cut, err)
		} else {
			m.Close()
		}
	}
	if refused == 0 || refused == points {
		t.Fatalf("%d truncation points, %d cut a region: the test did not test both", points, refused)
	}
	t.Logf("%d truncation points, %d cut a recorded region", points, refused)
}

func slicesContains(s []uint32, x uint32) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// TestOpenLoweredAllocEnd: AllocEnd, which no checksum covers, 64 bytes
// below the end of the last region a segment records. Every Open is
// ErrCorrupt and changes nothing; Recover moves AllocEnd back past every
// region and loses no entry.
func TestOpenLoweredAllocEnd(t *testing.T) {
	p, want := grownTwoSegments(t)
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := m.growth()
	end := int(g.allocEnd.Load())
	last := 0
	for _, r := range m.grownRegions() {
		last = max(last, r.end)
	}
	if last != end {
		t.Fatalf("the last region ends at %d, AllocEnd is %d", last, end)
	}
	g.allocEnd.Store(uint64(end - 64))
	m.Close()
	before, _ := os.ReadFile(p)
	for _, ro := range []bool{false, true} {
		if m, err := Open(p, Options{ReadOnly: ro}); !errors.Is(err, ErrCorrupt) {
			if err == nil {
				m.Close()
			}
			t.Fatalf("read-only %v: Open: %v, want ErrCorrupt", ro, err)
		}
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Fatal("a refused Open changed the file")
	}
	m, err = Open(p, Options{OpenDamaged: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	fixed, err := m.Recover()
	if err != nil || !hasProblem(fixed, "claimed space") {
		t.Fatalf("Recover: %q, %v", fixed, err)
	}
	if got := int(m.growth().allocEnd.Load()); got != end {
		t.Fatalf("AllocEnd after Recover: %d, want %d", got, end)
	}
	readAll(t, m, want)
}

// TestTruncatedUnderOpenMap: the file of an open, grown map is cut short
// in its growth area. Check says so (ErrTruncated) without touching the
// missing pages; Recover drops what was cut, says so, and gives the file
// its length back, after which Check passes and every read works.
func TestTruncatedUnderOpenMap(t *testing.T) {
	p, want := grownTwoSegments(t)
	ends := regionEnds(t, p)
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	page := os.Getpagesize()
	cut := (int(m.hdr.FileSize) + (len(m.current())-int(m.hdr.FileSize))/2) / page * page
	if testfs.CutRefused(t, os.Truncate(p, int64(cut))) {
		if err := m.Check(); err != nil {
			t.Fatalf("Check after a refused cut: %v", err)
		}
		readAll(t, m, want)
		return
	}
	if err := m.Check(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Check of a map whose file was cut to %d bytes: %v, want ErrTruncated", cut, err)
	}
	fixed, err := m.Recover()
	if !errors.Is(err, ErrTruncated) || !hasProblem(fixed, "past the end of the file") {
		t.Fatalf("Recover: %q, %v", fixed, err)
	}
	if err := m.Check(); err != nil {
		t.Fatalf("Check after Recover: %v", err)
	}
	for k, v := range want {
		got, err := m.Get([]byte(k))
		if ends[m.hash([]byte(k)).seg] <= cut && (err != nil || string(got) != v) {
			t.Fatalf("Get(%s) in a segment the cut spared = %q, %v", k, got, err)
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) after Recover: %v", k, err)
		}
	}
}

// TestOpenWhileGrowing: Opens of a map that another Map grows all the
// while succeed: a table or extent published between Open's reads of
// AllocEnd, the segment headers and the file's size is not damage.
func TestOpenWhileGrowing(t *testing.T) {
	p := tempPath(t)
	w, err := Open(p, Options{Entries: 100, AverageKeySize: 11, AverageValueSize: 16, MaxValueSize: 256, Segments: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, w)
	done := make(chan error, 1)
	go func() {
		for i := range 20_000 {
			if err := w.Put(key(i), bigValue(i, 16+i%200)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// At most 200: a closed map keeps the pages it mapped reserved, and
	// the test binary opens many maps.
	opens, finished := 0, false
	for ; opens < 200 && !finished; opens++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		m, err := Open(p, Options{ReadOnly: opens%2 == 0})
		if err != nil {
			t.Fatalf("Open %d while the map grows: %v", opens, err)
		}
		m.Close()
	}
	if !finished {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); st.TablesGrown == 0 || st.ExtentsAdded == 0 || opens < 10 {
		t.Fatalf("%d opens while the map grew %d tables and %d extents", opens, st.TablesGrown, st.ExtentsAdded)
	}
	t.Logf("%d opens while the map grew", opens)
}
