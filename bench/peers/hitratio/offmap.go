package hitratio

import (
	"encoding/binary"
	"os"
	"path/filepath"

	"github.com/offmap/offmap/offmap"
)

// Offmap is an offmap map that evicts (Options.Evict), in a file of its
// own, bounded to capacity entries: S3-FIFO kept per segment, in the
// file, where every process shares it. A request is a Has, and a Put of
// an 8-byte value on a miss.
type Offmap struct {
	m   *offmap.Map
	dir string
	key [8]byte
	val [8]byte
}

func NewOffmap(capacity int) *Offmap {
	dir, err := os.MkdirTemp("", "hitratio-")
	if err != nil {
		panic(err)
	}
	c, err := OpenOffmap(filepath.Join(dir, "cache.map"), capacity)
	if err != nil {
		panic(err)
	}
	c.dir = dir
	return c
}

// OpenOffmap opens the cache at path, making it for capacity entries if
// it does not exist: for several processes on one cache. Its Close
// leaves the file.
func OpenOffmap(path string, capacity int) (*Offmap, error) {
	m, err := offmap.Open(path, offmap.Options{
		Entries: capacity, Segments: offmapSegments(capacity), AverageKeySize: 8, AverageValueSize: 8, Evict: true,
	})
	if err != nil {
		return nil, err
	}
	return &Offmap{m: m}, nil
}

// Stats is the map's.
func (c *Offmap) Stats() offmap.Stats { return c.m.Stats() }

// offmapSegments is about one segment per 1024 entries, a power of two
// that divides capacity, so that the segments' bounds add up to it.
func offmapSegments(capacity int) int {
	s := 1
	for 2*s*1024 <= capacity && capacity%(2*s) == 0 {
		s *= 2
	}
	return s
}

func (c *Offmap) Access(k uint64) bool {
	binary.LittleEndian.PutUint64(c.key[:], k)
	if ok, err := c.m.Has(c.key[:]); err != nil {
		panic(err)
	} else if ok {
		return true
	}
	if err := c.m.Put(c.key[:], c.val[:]); err != nil {
		panic(err)
	}
	return false
}

func (c *Offmap) Len() int { return c.m.Len() }

// Close closes the map and removes its file.
func (c *Offmap) Close() error {
	err := c.m.Close()
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
	return err
}
