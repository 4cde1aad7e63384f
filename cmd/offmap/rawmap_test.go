package main

import (
	"encoding/binary"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// rawMap edits a map file's bytes as docs/FORMAT.md lays them out, to make
// the damage and the crash leftovers that verify and recover must handle.
// It is written from the format document, not from the tool's code.
type rawMap struct {
	path string
	b    []byte

	seed                                      uint64
	segments, slots, chunkSize, maxKey        uint32
	chunks                                    uint64
	segHeadersOff, segmentsOff, stride        uint64
	bitmapOff, scratchOff, areaOff            uint64
	headerEntries, headerFileSize, maxPerSegm uint64
}

var le = binary.LittleEndian

func readRaw(t *testing.T, path string) *rawMap {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return &rawMap{
		path: path, b: b,
		seed:           le.Uint64(b[24:]),
		headerEntries:  le.Uint64(b[32:]),
		headerFileSize: le.Uint64(b[16:]),
		maxKey:         le.Uint32(b[48:]),
		segments:       le.Uint32(b[56:]),
		chunkSize:      le.Uint32(b[60:]),
		slots:          le.Uint32(b[64:]),
		maxPerSegm:     uint64(le.Uint32(b[68:])),
		chunks:         le.Uint64(b[72:]),
		segHeadersOff:  le.Uint64(b[80:]),
		segmentsOff:    le.Uint64(b[88:]),
		stride:         le.Uint64(b[96:]),
		bitmapOff:      le.Uint64(b[104:]),
		scratchOff:     le.Uint64(b[112:]),
		areaOff:        le.Uint64(b[120:]),
	}
}

func (r *rawMap) write(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(r.path, r.b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// resum rewrites the header checksum after a header edit.
func (r *rawMap) resum() { le.PutUint64(r.b[248:], xxhash.Sum64(r.b[:248])) }

// hash returns where key lives (in a segment still at its first slot
// table): segment, home slot and the slot's match bits (used | hash
// fraction | tag).
func (r *rawMap) hash(key []byte) (seg, home uint32, match uint64) {
	h := xxhash.Sum64(key) ^ r.seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	seg = uint32(uint64(uint32(h>>32)) * uint64(r.segments) >> 32)
	frac := uint64(uint32(h) >> 12)
	tag := (h * 0x9E3779B97F4A7C15) >> 55
	return seg, uint32(frac * uint64(r.slots) >> 20), 1<<63 | frac<<32 | tag<<52
}

// Segment header words (offsets within the 256-byte header).
const (
	hdrOwner    = 0
	hdrVersion  = 16
	hdrTable    = 24
	hdrCount    = 32
	hdrDetached = 40
	hdrUsed     = 48
	hdrIntent   = 56
	hdrExtent1  = 80
)

func (r *rawMap) hdr(seg uint32, field int) uint64 {
	return le.Uint64(r.b[r.segHeadersOff+256*uint64(seg)+uint64(field):])
}

func (r *rawMap) setHdr(seg uint32, field int, v uint64) {
	le.PutUint64(r.b[r.segHeadersOff+256*uint64(seg)+uint64(field):], v)
}

func (r *rawMap) segBase(seg uint32) uint64 { return r.segmentsOff + uint64(seg)*r.stride }

func (r *rawMap) slot(seg, i uint32) uint64 {
	return le.Uint64(r.b[r.segBase(seg)+8*uint64(i):])
}

func (r *rawMap) setSlot(seg, i uint32, w uint64) {
	le.PutUint64(r.b[r.segBase(seg)+8*uint64(i):], w)
}

func slotChunkOf(w uint64) uint32 { return uint32(w) }

// homeOf is the home slot of slot word w in the segment's first table.
func (r *rawMap) homeOf(w uint64) uint32 { return uint32((w >> 32 & 0xfffff) * uint64(r.slots) >> 20) }

// entryOff is the file offset of the entry at chunk c of seg.
func (r *rawMap) entryOff(seg, c uint32) uint64 {
	return r.segBase(seg) + r.areaOff + uint64(c)*uint64(r.chunkSize)
}

func pad8(n int) int { return (n + 7) &^ 7 }

// entry returns the key and value of the entry at chunk c of seg.
func (r *rawMap) entry(seg, c uint32) (key, value []byte) {
	off := r.entryOff(seg, c)
	kl, vl := int(le.Uint32(r.b[off:])), int(le.Uint32(r.b[off+4:]))
	k := r.b[off+8 : off+8+uint64(kl)]
	v := r.b[off+8+uint64(pad8(kl)) : off+8+uint64(pad8(kl))+uint64(vl)]
	return k, v
}

// chunksFor is how many chunks an entry of these sizes takes.
func (r *rawMap) chunksFor(keyLen, valLen int) uint32 {
	return uint32((8 + pad8(keyLen) + pad8(valLen) + int(r.chunkSize) - 1) / int(r.chunkSize))
}

// writeEntry writes an entry at chunk c of seg.
func (r *rawMap) writeEntry(seg, c uint32, key, value []byte) {
	off := r.entryOff(seg, c)
	le.PutUint32(r.b[off:], uint32(len(key)))
	le.PutUint32(r.b[off+4:], uint32(len(value)))
	copy(r.b[off+8:], key)
	copy(r.b[off+8+uint64(pad8(len(key))):], value)
}

// find returns the segment, slot and slot word of key, which must exist.
func (r *rawMap) find(t *testing.T, key string) (seg, slot uint32, w uint64) {
	t.Helper()
	seg, home, match := r.hash([]byte(key))
	for i, n := home, uint32(0); n < r.slots; i, n = (i+1)%r.slots, n+1 {
		w := r.slot(seg, i)
		if w == 0 {
			break
		}
		if w&^(1<<61|0xffffffff) == match {
			if k, _ := r.entry(seg, slotChunkOf(w)); string(k) == key {
				return seg, i, w
			}
		}
	}
	t.Fatalf("key %q not in the file", key)
	return
}

// emptySlotFrom returns the first empty slot of seg at or after i.
func (r *rawMap) emptySlotFrom(seg, i uint32) uint32 {
	for r.slot(seg, i) != 0 {
		i = (i + 1) % r.slots
	}
	return i
}

func (r *rawMap) bitmapByte(seg, c uint32) *byte {
	return &r.b[r.segBase(seg)+r.bitmapOff+uint64(c/8)]
}

func (r *rawMap) used(seg, c uint32) bool { return *r.bitmapByte(seg, c)&(1<<(c%8)) != 0 }

func (r *rawMap) setUsed(seg, c uint32, on bool) {
	if on {
		*r.bitmapByte(seg, c) |= 1 << (c % 8)
	} else {
		*r.bitmapByte(seg, c) &^= 1 << (c % 8)
	}
}

// freeRun returns the first chunk of n free chunks in seg.
func (r *rawMap) freeRun(t *testing.T, seg, n uint32) uint32 {
	t.Helper()
	for c := uint32(0); uint64(c+n) <= r.chunks; c++ {
		free := true
		for k := c; k < c+n && free; k++ {
			free = !r.used(seg, k)
		}
		if free {
			return c
		}
	}
	t.Fatalf("segment %d has no %d free chunks", seg, n)
	return 0
}

// setScratch writes a redo record: the value's length, then the value.
func (r *rawMap) setScratch(seg uint32, value []byte) {
	off := r.segBase(seg) + r.scratchOff
	le.PutUint64(r.b[off:], uint64(len(value)))
	copy(r.b[off+8:], value)
}

// keysBySegment groups the keys of entries by the segment they live in.
func (r *rawMap) keysBySegment(t *testing.T, keys map[string]string) map[uint32][]string {
	t.Helper()
	by := make(map[uint32][]string)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		seg, _, _ := r.find(t, k)
		by[seg] = append(by[seg], k)
	}
	return by
}
