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
	m, err := offmap.Open(filepath.Join(dir, "cache.map"), offmap.Options{
		Entries: capacity, Segments: offmapSegments(capacity), AverageKeySize: 8, AverageValueSize: 8, Evict: true,
	})
	if err != nil {
		panic(err)
	}
	return &Offmap{m: m, dir: dir}
}

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
	os.RemoveAll(c.dir)
	return err
}
