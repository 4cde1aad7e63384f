package main

import (
	"fmt"
	"os"
)

// The header page's reserved bytes must be zero (docs/FORMAT.md, "Header
// page"); offmap.Open checks the checksummed part, verify checks them all.
const (
	rawHeaderSize     = 4096
	rawChecksumEnd    = 248 // the checksum covers [0, 248)
	rawReservedStart  = 136 // [136, 248) and [256, 4096) are reserved, zero
	rawReserved2Start = 256
)

// rawHeader is the header page of a validated map file.
type rawHeader struct{ page []byte }

func readRawHeader(f *os.File) (rawHeader, error) {
	page := make([]byte, rawHeaderSize)
	if _, err := f.ReadAt(page, 0); err != nil {
		return rawHeader{}, fmt.Errorf("reading the header: %w", err)
	}
	return rawHeader{page: page}, nil
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
