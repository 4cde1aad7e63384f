package offmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
)

// ErrCurrent is returned by Upgrade for a file that already has the
// current format version: there is nothing to upgrade, and the file is
// left as it was.
var ErrCurrent = errors.New("offmap: the file already has the current format version")

// Upgrade rewrites the map file at path, of format version 1 (from before
// maps could grow), as a map of the current version, and returns how many
// entries it copied. Version 1 files are refused by Open with ErrVersion.
// A file of version 2 (lock words naming processes by pid) is upgraded in
// place, as a writable Open alone with it does: only its header's version
// changes, and Upgrade returns 0.
//
// No process may have the map open: Upgrade takes an exclusive lock on the
// file, and fails at once if another process holds the map. It builds the
// new map under a temporary name in the same directory (".NAME.upgrading"),
// with the old map's Entries, sizes, Segments and permission (and its owner
// and group, where this process may set them) and the default MaxFileSize,
// copies every live entry into it, syncs it, and renames it over path, so
// that path holds either the old file or the complete new one, whatever
// happens (a symbolic link at path stays one, to the new file). Entries
// deleted while value handles pinned them are dropped; pinned entries keep
// their values. A write that a crashed process left half done is taken as
// done or not done, as a repair would. A process that opens path while
// Upgrade runs waits for it, then gets ErrVersion from the old file;
// opening again finds the new one.
//
// A damaged file is an error wrapping ErrCorrupt or ErrTruncated (Upgrade
// copies nothing it cannot check: every entry must lie inside its segment
// and hash to its slot), a file of the current version one wrapping
// ErrCurrent, and any other file the error Open would return. On error,
// the file at path is unchanged.
func Upgrade(path string) (n int, err error) {
	defer func() {
		if err != nil {
			err = &shm.OpError{Pkg: "offmap", Op: "upgrade", Path: path, Err: err}
		}
	}()
	// A symbolic link stays one: the file it leads to is replaced.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return 0, err
	}
	f, ro, err := shm.OpenFile(real, false)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if ro {
		return 0, fmt.Errorf("%w: this user may not write the file", os.ErrPermission)
	}
	if err := shm.Flock(f, true, true); err != nil {
		if errors.Is(err, shm.ErrWouldBlock) {
			return 0, errors.New("another process has the map open; upgrade it when no process uses it")
		}
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	// Another upgrade may have renamed a new file over path between the
	// open and the lock: this file is no longer the map.
	if !shm.IsNamed(f, real) {
		return 0, errors.New("the file was replaced as the upgrade began (by another upgrade?); try again")
	}
	page := make([]byte, min(fi.Size(), headerSize))
	if _, err := f.ReadAt(page, 0); err != nil && err != io.EOF {
		return 0, err
	}
	if len(page) >= 12 && binary.LittleEndian.Uint32(page[8:]) == pidTokenVersion {
		if _, err := decodeHeader(page, fi.Size()); err != nil {
			return 0, err
		}
		return 0, upgradeInPlace(f, page)
	}
	h, err := v1DecodeHeader(page, fi.Size())
	if err != nil {
		return 0, err
	}
	mp, err := shm.Map(f, 0, int(h.fileSize), false)
	if err != nil {
		return 0, err
	}
	defer mp.Unmap()
	mem := mp.Bytes()

	// Holding the lock on the file at path, this process is the only
	// upgrader: a temporary file left by an earlier, interrupted one is
	// stale.
	tmp := filepath.Join(filepath.Dir(real), "."+filepath.Base(real)+".upgrading")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	opts := Options{
		Entries:          int(h.entries),
		AverageKeySize:   int(h.avgKey),
		AverageValueSize: int(h.avgValue),
		MaxKeySize:       int(h.maxKey),
		MaxValueSize:     int(h.maxValue),
		Segments:         int(h.segments),
		FileMode:         fi.Mode().Perm(),
		set:              h.maxValue == 0,
	}
	defer os.Remove(tmp) // after a successful rename, there is nothing there
	m, err := Open(tmp, opts)
	if err != nil {
		return 0, fmt.Errorf("creating the new map: %w", err)
	}
	n, err = h.copyInto(m, mem)
	if err == nil {
		err = m.Sync()
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	// Windows does not replace a file that has a view.
	mp.Unmap()
	shm.CopyOwner(tmp, fi)                                  // where allowed: else the new file is this user's
	if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil { // exactly, whatever the umask
		return 0, err
	}
	if err := shm.Replace(tmp, real, f); err != nil {
		return 0, err
	}
	if d, err := os.Open(filepath.Dir(real)); err == nil {
		d.Sync()
		d.Close()
	}
	return n, nil
}

// upgradeInPlace rewrites the header of a file of pidTokenVersion, whose
// first bytes are page, as version formatVersion: the two differ only in
// what a token in a lock word means. The caller holds the file alone (an
// exclusive flock): no process of the old version has it open. Tokens the
// old version left in lock words are judged dead by the new one (they
// name no witness byte that anyone holds), so whoever meets them takes the
// lock over and repairs, as after any crash.
func upgradeInPlace(f *os.File, page []byte) error {
	return shm.RewriteVersion(f, page, formatVersion, checksumOff)
}

// Format version 1, as far as Upgrade reads it: the header page has the
// fields of version 2's up to offset 136 (without MaxFileSize), segment
// headers are 64 bytes (lock 16, version, count, detached, usedChunks,
// intent, allocHint), a segment's entry space is one piece at AreaOff, its
// slots are
//
//	bits  0-31  chunk        bits 32-47  home slot     bits 48-60  tag
//	bit     61  pinned       bit     62  detached      bit     63  used
//
// and the key hash, mix(xxhash64(key) ^ seed), gives the segment from its
// high 32 bits, the home slot from its low 32 bits (both multiply-shift)
// and the tag from (h * 0x9E3779B97F4A7C15) >> 51.
const (
	v1Version           = 1
	v1SegmentHeaderSize = 64
	v1IntentOff         = 48 // in a segment header
	v1MaxSegments       = 1 << 16
	v1MaxSlots          = 1 << 16
	v1MaxFileSize       = 1 << 46
	v1SlotUsed          = 1 << 63
	v1SlotDetached      = 1 << 62
	v1SlotHomeShift     = 32
	v1SlotTagShift      = 48
	// v1SlotMatch selects the bits a key's hash fixes: used, home, tag.
	v1SlotMatch = v1SlotUsed | (1<<16-1)<<v1SlotHomeShift | (1<<13-1)<<v1SlotTagShift
)

type v1Header struct {
	fileSize, seed, entries            uint64
	avgKey, avgValue, maxKey, maxValue uint32
	segments, chunkSize, slots         uint32
	chunks                             uint64
	segHeadersOff, segmentsOff, stride uint64
	scratchOff, areaOff                uint64
}

// v1DecodeHeader checks the header page b of a file of size bytes as a
// version 1 reader did, so that every offset derived from it lies in the
// file.
func v1DecodeHeader(b []byte, size int64) (*v1Header, error) {
	if err := shm.CheckHeader(b, size, magic, v1Version, v1Version, headerSize, checksumOff); err != nil {
		if errors.Is(err, shm.ErrVersion) && binary.LittleEndian.Uint32(b[8:]) == formatVersion {
			return nil, fmt.Errorf("%w (version %d)", ErrCurrent, formatVersion)
		}
		return nil, err
	}
	le := binary.LittleEndian
	h := &v1Header{
		fileSize: le.Uint64(b[16:]), seed: le.Uint64(b[24:]), entries: le.Uint64(b[32:]),
		avgKey: le.Uint32(b[40:]), avgValue: le.Uint32(b[44:]),
		maxKey: le.Uint32(b[48:]), maxValue: le.Uint32(b[52:]),
		segments: le.Uint32(b[56:]), chunkSize: le.Uint32(b[60:]), slots: le.Uint32(b[64:]),
		chunks:        le.Uint64(b[72:]),
		segHeadersOff: le.Uint64(b[80:]), segmentsOff: le.Uint64(b[88:]), stride: le.Uint64(b[96:]),
		scratchOff: le.Uint64(b[112:]), areaOff: le.Uint64(b[120:]),
	}
	bitmapOff := le.Uint64(b[104:])
	maxPer := le.Uint32(b[68:])
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: version 1 header: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	// Every field is checked against the file size limit first, so that
	// the sums below cannot overflow.
	switch {
	case le.Uint32(b[12:]) != headerSize:
		return nil, bad("header size %d", le.Uint32(b[12:]))
	case h.fileSize > v1MaxFileSize || h.segHeadersOff > v1MaxFileSize || h.segmentsOff > v1MaxFileSize ||
		h.stride > v1MaxFileSize || bitmapOff > v1MaxFileSize || h.scratchOff > v1MaxFileSize || h.areaOff > v1MaxFileSize:
		return nil, bad("offsets beyond %d bytes", uint64(v1MaxFileSize))
	case h.segments == 0 || h.segments > v1MaxSegments:
		return nil, bad("segments %d", h.segments)
	case h.chunkSize < 8 || h.chunkSize > 4096 || h.chunkSize&(h.chunkSize-1) != 0:
		return nil, bad("chunk size %d", h.chunkSize)
	case h.slots < 2 || h.slots > v1MaxSlots || maxPer == 0 || maxPer >= h.slots:
		return nil, bad("%d slots per segment, at most %d entries", h.slots, maxPer)
	case h.chunks == 0 || h.chunks >= 1<<32:
		return nil, bad("chunks per segment %d", h.chunks)
	case h.maxKey == 0 || h.maxKey > maxKeyLimit || h.maxValue > maxValueLimit:
		return nil, bad("max key %d, max value %d", h.maxKey, h.maxValue)
	case h.avgKey == 0 || h.avgKey > h.maxKey || h.avgValue > h.maxValue || (h.avgValue == 0) != (h.maxValue == 0):
		return nil, bad("averages %d/%d for maxima %d/%d", h.avgKey, h.avgValue, h.maxKey, h.maxValue)
	case h.entries == 0 || h.entries > 1<<40:
		return nil, bad("entries %d", h.entries)
	case h.segHeadersOff < headerSize || h.segHeadersOff%64 != 0 || h.segmentsOff%64 != 0 ||
		h.stride%64 != 0 || h.scratchOff%8 != 0 || h.areaOff%8 != 0:
		return nil, bad("unaligned regions")
	case h.segHeadersOff+uint64(h.segments)*v1SegmentHeaderSize > h.segmentsOff:
		return nil, bad("segment headers overlap segments")
	case uint64(h.slots)*8 > bitmapOff || bitmapOff+(h.chunks+63)/64*8 > h.scratchOff ||
		h.scratchOff+8+uint64(shm.Pad8(int(h.maxValue))) > h.areaOff:
		return nil, bad("segment regions overlap")
	}
	if hi, area := bits.Mul64(h.chunks, uint64(h.chunkSize)); hi != 0 || h.areaOff+area > h.stride {
		return nil, bad("entry space of %d chunks does not fit a stride of %d", h.chunks, h.stride)
	}
	if hi, all := bits.Mul64(uint64(h.segments), h.stride); hi != 0 || h.segmentsOff+all != h.fileSize {
		return nil, bad("segments end past the file size %d", h.fileSize)
	}
	if uint64(size) < h.fileSize {
		return nil, fmt.Errorf("%w: %d bytes, the header says %d", ErrTruncated, size, h.fileSize)
	}
	return h, nil
}

// copyInto puts every live entry of the version 1 file mem into m and
// returns how many. A fault reading mem (the file truncated under it by a
// process that ignores the lock) is an error, not a crash.
func (h *v1Header) copyInto(m *Map, mem []byte) (n int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: memory fault reading the version 1 file: was it truncated?", ErrTruncated)
		}
	}()
	for i := range int(h.segments) {
		k, err := h.copySegment(m, mem, i)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (h *v1Header) copySegment(m *Map, mem []byte, seg int) (int, error) {
	le := binary.LittleEndian
	base := int(h.segmentsOff) + seg*int(h.stride)
	slots := mem[base : base+8*int(h.slots)]
	area := mem[base+int(h.areaOff) : base+int(h.areaOff)+int(h.chunks)*int(h.chunkSize)]
	scratch := mem[base+int(h.scratchOff) : base+int(h.areaOff)]
	intent := le.Uint64(mem[int(h.segHeadersOff)+seg*v1SegmentHeaderSize+v1IntentOff:])
	bad := func(slot int, format string, args ...any) error {
		return fmt.Errorf("%w: version 1 file: segment %d, slot %d: %s (copied nothing; a release that reads version 1 can 'offmap recover' it first)",
			ErrCorrupt, seg, slot, fmt.Sprintf(format, args...))
	}
	chunksFor := func(keyLen, valLen int) int {
		return (v1EntryBytes(keyLen, valLen) + int(h.chunkSize) - 1) / int(h.chunkSize)
	}
	seenChunk := make(map[uint32]bool)
	seenKey := make(map[string]int)
	n := 0
	for i := range int(h.slots) {
		w := le.Uint64(slots[8*i:])
		if w == 0 {
			continue
		}
		if w&v1SlotUsed == 0 {
			return n, bad(i, "bad slot word %#x", w)
		}
		c := uint32(w)
		off := int(c) * int(h.chunkSize)
		if uint64(c) >= h.chunks || off+8 > len(area) {
			return n, bad(i, "chunk %d outside the segment's %d chunks", c, h.chunks)
		}
		keyLen, valLen := int(le.Uint32(area[off:])), int(le.Uint32(area[off+4:]))
		if keyLen > int(h.maxKey) || valLen > int(h.maxValue) || off+v1EntryBytes(keyLen, valLen) > len(area) {
			return n, bad(i, "entry at chunk %d is over the size limits or outside the segment", c)
		}
		key := area[off+8 : off+8+keyLen]
		if s, match := h.hash(key); s != seg || w&v1SlotMatch != match {
			return n, bad(i, "key at chunk %d does not hash to this slot", c)
		}
		if w&v1SlotDetached != 0 {
			continue // deleted while pinned: no handle is left to read it
		}
		if seenChunk[c] {
			continue // a delete's shift was cut off: the same entry twice
		}
		seenChunk[c] = true
		if j, dup := seenKey[string(key)]; dup {
			return n, bad(i, "key %q is also in slot %d", key, j)
		}
		seenKey[string(key)] = i
		vo := off + 8 + shm.Pad8(keyLen)
		value := area[vo : vo+valLen]
		if intent != 0 && uint64(c) == intent-1 {
			// An in-place update was cut off after it was decided: its
			// new value is in the redo record, as a repair would find it.
			if r := le.Uint64(scratch); r <= uint64(h.maxValue) && chunksFor(keyLen, int(r)) <= chunksFor(keyLen, valLen) {
				value = scratch[8 : 8+int(r)]
			}
		}
		if err := m.Put(key, value); err != nil {
			return n, fmt.Errorf("copying key %q: %w", key, err)
		}
		n++
	}
	return n, nil
}

// hash returns the segment and the slot bits (used, home, tag) of key in
// the version 1 file.
func (h *v1Header) hash(key []byte) (seg int, match uint64) {
	x := xxhash.Sum64(key) ^ h.seed
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	seg = int(uint64(uint32(x>>32)) * uint64(h.segments) >> 32)
	home := uint64(uint32(x)) * uint64(h.slots) >> 32
	tag := (x * 0x9E3779B97F4A7C15) >> 51
	return seg, v1SlotUsed | home<<v1SlotHomeShift | tag<<v1SlotTagShift
}

func v1EntryBytes(keyLen, valLen int) int { return 8 + shm.Pad8(keyLen) + shm.Pad8(valLen) }
