package main

import (
	"encoding/binary"
	"fmt"
	"os"
)

// The package offmap does not show the segment headers' seqlock version and
// redo word, nor the header page's offsets; stat and verify read them from
// the file as docs/FORMAT.md lays them out. They read only files that
// offmap.Open has validated, so every offset is in bounds. Reads of the
// file go through the page cache that the map's users share, so they see
// the mapped memory as it is (a word at a time, not an instant).

// Header page fields (docs/FORMAT.md, "Header page").
const (
	rawHeaderSize     = 4096
	rawOffFileSize    = 16
	rawOffSegments    = 56
	rawOffSegHeaders  = 80
	rawChecksumEnd    = 248 // the checksum covers [0, 248)
	rawReservedStart  = 136 // [136, 248) and [256, 4096) are reserved, zero
	rawReserved2Start = 256
	rawSegHeaderSize  = 64
)

// rawHeader is the header page of a validated map file.
type rawHeader struct {
	page          []byte
	fileSize      int64 // the size the header declares
	segments      int
	segHeadersOff int64
}

// rawSegment is a segment header (docs/FORMAT.md, "Segment header").
type rawSegment struct {
	owner   uint64 // lock owner token: pid | starttime << 32
	version uint64 // odd while a writer changes the segment
	intent  uint64 // non-zero: a redo record is pending
}

func readRawHeader(f *os.File) (rawHeader, error) {
	page := make([]byte, rawHeaderSize)
	if _, err := f.ReadAt(page, 0); err != nil {
		return rawHeader{}, fmt.Errorf("reading the header: %w", err)
	}
	le := binary.LittleEndian
	h := rawHeader{
		page:          page,
		fileSize:      int64(le.Uint64(page[rawOffFileSize:])),
		segments:      int(le.Uint32(page[rawOffSegments:])),
		segHeadersOff: int64(le.Uint64(page[rawOffSegHeaders:])),
	}
	// The file was validated when opened; guard against its replacement.
	if string(page[:8]) != "OFFMAP\x00\x00" || h.segments < 1 || h.segments > 1<<16 || h.segHeadersOff < rawHeaderSize {
		return h, fmt.Errorf("the header changed since the map was opened")
	}
	return h, nil
}

func readRawSegments(f *os.File, h rawHeader) ([]rawSegment, error) {
	b := make([]byte, h.segments*rawSegHeaderSize)
	if _, err := f.ReadAt(b, h.segHeadersOff); err != nil {
		return nil, fmt.Errorf("reading the segment headers: %w", err)
	}
	le := binary.LittleEndian
	segs := make([]rawSegment, h.segments)
	for i := range segs {
		s := b[i*rawSegHeaderSize:]
		segs[i] = rawSegment{owner: le.Uint64(s[0:]), version: le.Uint64(s[16:]), intent: le.Uint64(s[48:])}
	}
	return segs, nil
}

// reservedNonZero returns the first non-zero byte offset in the header
// page's reserved ranges, or -1.
func (h rawHeader) reservedNonZero() int {
	for _, r := range [][2]int{{rawReservedStart, rawChecksumEnd}, {rawReserved2Start, rawHeaderSize}} {
		for i := r[0]; i < r[1]; i++ {
			if h.page[i] != 0 {
				return i
			}
		}
	}
	return -1
}

// rawState reads the header and segment headers of the map file at path.
func rawState(path string) (rawHeader, []rawSegment, error) {
	f, err := os.Open(path)
	if err != nil {
		return rawHeader{}, nil, err
	}
	defer f.Close()
	h, err := readRawHeader(f)
	if err != nil {
		return h, nil, err
	}
	segs, err := readRawSegments(f, h)
	return h, segs, err
}
