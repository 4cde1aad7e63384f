package offmap

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The map has two lookups: find, used by writers and locked readers over a
// segment, and probe, the lock-free reader's, which reads the mapping
// directly to save instructions. They must agree: wherever probe reports
// no damage, find finds the same entry, or the same absence. (Where probe
// reports damage, the reader falls back to the locked path, which uses
// find.) This runs both over sound maps, with deletes, and over maps with
// random words of their slots and entries overwritten.
func TestFindAndProbeAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		m := openTest(t, Options{Entries: 2000, AverageKeySize: 10, AverageValueSize: 12, Segments: 4})
		n := 200 + rng.IntN(1500)
		for i := range n {
			mustPut(t, m, key(i), bytes.Repeat([]byte{byte(i)}, rng.IntN(40)))
		}
		for i := 0; i < n; i += 1 + rng.IntN(5) {
			m.Delete(key(i))
		}
		if round%2 == 1 {
			// Damage: overwrite random words of the segments (slots,
			// entry headers, keys) with random or small values.
			start, end := int(m.hdr.SegmentsOff), int(m.hdr.SegmentsOff)+int(m.hdr.Segments)*int(m.hdr.SegmentStride)
			for range 1 + rng.IntN(60) {
				off := (start + rng.IntN(end-start)) &^ 7
				w := rng.Uint64()
				if rng.IntN(2) == 0 {
					w &= 0xffff_ffff_0000_00ff
				}
				for i := range 8 {
					m.mem[off+i] = byte(w >> (8 * i))
				}
			}
		}
		probed, found := 0, 0
		for i := range n + 100 { // 100 keys never stored
			k := key(i)
			h := m.hash(k)
			s := m.segment(h.seg)
			_, _, e, ok, fbad := m.find(&s, k, h)
			slots, slotsN := m.tableOf(s.base, s.hdr.table.Load())
			valOff, valLen, pw, _, pbad := m.probe(s.mem, s.hdr, s.base, slots, slotsN, k, h)
			pok := pw != 0
			if pbad {
				continue
			}
			probed++
			if ok != pok {
				t.Fatalf("round %d, key %q: find found=%v (bad %v), probe found=%v", round, k, ok, fbad, pok)
			}
			if !ok {
				continue
			}
			found++
			fv := s.mem[e.valOff() : e.valOff()+e.valLen]
			pv := m.mem[valOff : valOff+valLen]
			if !bytes.Equal(fv, pv) || &fv[:1][0] != &pv[:1][0] && len(fv) > 0 {
				t.Fatalf("round %d, key %q: find's value %x, probe's %x", round, k, fv, pv)
			}
		}
		if probed < n/2 || round%2 == 0 && found == 0 {
			t.Fatalf("round %d: only %d lookups of %d compared, %d found", round, probed, n+100, found)
		}
		if round%2 == 1 {
			m.Close() // damaged on purpose: no Check at cleanup
		}
	}
}
