package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/offmap"
)

// mustExist fails with a one-line error unless path is an existing file.
// offmap.Open creates a missing file (of default sizes when given none);
// commands that work on an existing map check first, so that they never
// create one.
func mustExist(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file", path)
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s is a directory, not a map file", path)
	}
	return nil
}

// Options for openMap: the file's layout, read-only or not.
var (
	readOnly  = offmap.Options{ReadOnly: true}
	readWrite = offmap.Options{}
)

// openMap opens the existing map at path; zero sizes in opts take the
// file's. Read-only maps never repair anything, so what a crash left
// stays visible to stat and verify.
func openMap(path string, opts offmap.Options) (*offmap.Map, error) {
	if err := mustExist(path); err != nil {
		return nil, err
	}
	m, err := offmap.Open(path, opts)
	if err != nil {
		return nil, err
	}
	if !opts.ReadOnly && m.ReadOnly() {
		m.Close()
		return nil, fmt.Errorf("%s: permission denied (this user may not write the file)", path)
	}
	return m, nil
}

// isFileDamage reports whether err says that a file is not a sound map:
// empty, foreign, truncated, of another version, or corrupt.
func isFileDamage(err error) bool {
	for _, e := range []error{offmap.ErrEmptyFile, offmap.ErrNotMap, offmap.ErrTruncated, offmap.ErrVersion, offmap.ErrCorrupt} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// fileAlign is the granule of a map file's size: the library rounds
// MaxFileSize down to a multiple of it.
const fileAlign = 64 << 10

// layout holds the flags that size a new map (create, load, copy).
type layout struct {
	entries                    int
	avgKey, avgValue           int
	maxKey, maxValue, segments int
	maxFileSize                int64
	checksums                  bool
	ttl                        time.Duration
	expiring                   bool
	evict                      bool
	mode                       octalMode
}

// octalMode is a file permission flag written in octal, like chmod's.
type octalMode uint32

func (m *octalMode) String() string { return fmt.Sprintf("%#o", uint32(*m)) }

func (m *octalMode) Set(s string) error {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return fmt.Errorf("%q is not an octal permission such as 0644", s)
	}
	*m = octalMode(v)
	return nil
}

func (l *layout) define(fs *flag.FlagSet) {
	cliargs.CountVar(fs, &l.entries, "entries", 0, "the map starts with room for `N` entries, and grows past them (default 1024)")
	cliargs.IntSizeVar(fs, &l.avgKey, "avg-key", 0, "`BYTES` per key on average (default 32)")
	cliargs.IntSizeVar(fs, &l.avgValue, "avg-value", 0, "`BYTES` per value on average (default 64)")
	cliargs.IntSizeVar(fs, &l.maxKey, "max-key", 0, "`BYTES` of the largest key (at most 65535; default max(8 x avg-key, 256))")
	cliargs.IntSizeVar(fs, &l.maxValue, "max-value", 0, "`BYTES` of the largest value (default max(8 x avg-value, 256), or 4096 without --avg-value)")
	cliargs.CountVar(fs, &l.segments, "segments", 0, "`N` independently locked segments (default: about one per 1024 entries, at least 16)")
	cliargs.SizeVar(fs, &l.maxFileSize, "max-file-size", 0, "the file grows to at most `BYTES` (rounded down to a multiple of 64 KiB, at least the starting size; default 1024 x the starting size within [1 GiB, 64 GiB], at least 4 x the starting size); the map is full there")
	fs.BoolVar(&l.checksums, "checksums", false, "keep a checksum in every entry, which verify and recover use to find entries a power cut tore")
	fs.DurationVar(&l.ttl, "ttl", 0, "entries expire `DURATION` after each write (e.g. 30m); 'offmap sweep' reclaims them")
	fs.BoolVar(&l.expiring, "expiring", false, "entries may expire (a time to live per write through the library), with no default --ttl")
	fs.BoolVar(&l.evict, "evict", false, "make a cache: it holds at most --entries entries and its file at most --max-file-size bytes, and a put that needs room evicts entries unlikely to be read again (S3-FIFO) instead of failing")
	l.mode = 0o600
	fs.Var(&l.mode, "mode", "permission `BITS` of the new file, in octal")
}

// check rejects sizes given as zero or negative: zero means "not given".
func (l *layout) check(c *cli, fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "entries", "avg-key", "avg-value", "max-key", "max-value", "segments", "max-file-size":
			if n, _ := f.Value.(flag.Getter).Get().(int64); n <= 0 {
				err = c.usageError("--%s must be positive", f.Name)
			}
		}
	})
	return err
}

func (l *layout) options() offmap.Options {
	return offmap.Options{
		Entries:          l.entries,
		AverageKeySize:   l.avgKey,
		AverageValueSize: l.avgValue,
		MaxKeySize:       l.maxKey,
		MaxValueSize:     l.maxValue,
		Segments:         l.segments,
		MaxFileSize:      l.maxFileSize,
		ChecksumEntries:  l.checksums,
		TTL:              l.ttl,
		Expiring:         l.expiring,
		Evict:            l.evict,
		FileMode:         os.FileMode(l.mode),
	}
}

// fill sets the sizes that were not given from another layout.
func (l *layout) fill(from layout) {
	if l.entries == 0 {
		l.entries = from.entries
	}
	if l.avgKey == 0 {
		l.avgKey = from.avgKey
	}
	if l.avgValue == 0 {
		l.avgValue = from.avgValue
	}
	if l.maxKey == 0 {
		l.maxKey = from.maxKey
	}
	if l.maxValue == 0 {
		l.maxValue = from.maxValue
	}
	if l.segments == 0 {
		l.segments = from.segments
	}
	if l.maxFileSize == 0 {
		l.maxFileSize = from.maxFileSize
	}
	l.checksums = l.checksums || from.checksums
	l.expiring = l.expiring || from.expiring
	l.evict = l.evict || from.evict
	if l.ttl == 0 {
		l.ttl = from.ttl
	}
}

// layoutOf returns the layout of an open map.
func layoutOf(st offmap.Stats) layout {
	return layout{
		entries:     st.Capacity,
		avgKey:      st.AverageKeySize,
		avgValue:    st.AverageValueSize,
		maxKey:      st.MaxKeySize,
		maxValue:    st.MaxValueSize,
		segments:    st.Segments,
		maxFileSize: st.MaxFileSize,
		checksums:   st.ChecksumEntries,
		ttl:         st.TTL,
		expiring:    st.Expiring,
		evict:       st.Evict,
	}
}

// createMap makes a new map at path, failing if the path exists.
func createMap(path string, l layout) (*offmap.Map, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%s already exists", path)
	}
	return offmap.Open(path, l.options())
}
