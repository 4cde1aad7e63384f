package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/offmap"
)

var loadCommand = command{
	name:     "load",
	synopsis: "[size flags] [--mode BITS] [--quiet] FILE [INPUT]",
	summary:  "put entries read in dump format (from stdin or INPUT)",
	help: `Load reads entries in any of dump's forms (text, hex or JSON lines, even
mixed) from INPUT, or stdin when INPUT is absent or "-", puts each into
the map, replacing the value of a key already present, and prints how
many it loaded. 'offmap dump A | offmap load B' makes B hold exactly A's
entries.

When FILE does not exist, load creates it with the layout of the dump's
'#' layout line. The size flags (--entries, --avg-key, --avg-value,
--max-key, --max-value, --segments) may repeat that layout but not change
it: a flag that differs from the line is an error, and nothing is
created. To load into a map of another size or layout, make it first
with 'offmap create' (or re-shape a map with 'offmap copy'). A JSON dump
has no layout line: the size flags given size the new map, and those not
given take create's defaults.
--max-file-size, which no dump line gives, bounds the new file's growth.

When FILE exists, the dump's layout line is ignored, size flags must match
FILE's layout and --mode is refused. The map grows as entries arrive; a
load stops with 'map is full' only where the file reaches its maximum
size.

A malformed line stops the load with its line number; the entries before
it stay loaded. On a terminal, stderr shows a progress bar.`,
	examples: `  offmap dump old.map | offmap load new.map
  # into a new map twice as large: make it, then load
  offmap create new.map --entries 2000000 --avg-key 16 --avg-value 8
  offmap load new.map old.txt
  # a JSON dump into a new map
  offmap load --entries 1000 --avg-key 16 --avg-value 32 new.map entries.jsonl`,
	run: runLoad,
}

func runLoad(c *cli, args []string) error {
	fs := c.flags()
	var l layout
	l.define(fs)
	quiet := fs.Bool("quiet", false, "no progress bar")
	pos, err := c.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	if err := l.check(c, fs); err != nil {
		return err
	}
	path := pos[0]
	in, total, err := c.input(pos)
	if err != nil {
		return err
	}
	defer in.Close()
	r := newDumpReader(in)
	key, value, rerr := r.next() // reads the layout line before the map is opened
	if rerr != nil && rerr != io.EOF {
		return rerr
	}
	given := givenSizes(fs)
	modeSet := false
	fs.Visit(func(f *flag.Flag) { modeSet = modeSet || f.Name == "mode" })
	var m *offmap.Map
	created := false
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if r.hasLayout {
			if bad := conflicts(l, r.layout, given); bad != "" {
				return c.usageError("size flags conflict with the dump's layout line: %s; to load into another layout, make %s first with 'offmap create'", bad, path)
			}
			l.fill(r.layout)
		}
		if m, err = createMap(path, l); err != nil {
			return err
		}
		created = true
	} else {
		if modeSet {
			return c.usageError("--mode applies to a new map only, and %s exists (chmod changes its permission)", path)
		}
		opts := l.options()
		opts.FileMode = 0
		if m, err = openMap(path, opts); err != nil {
			if errors.Is(err, offmap.ErrOptionsMismatch) {
				return fileConflict(c, path, l, given, err)
			}
			return err
		}
	}
	p := c.newProgress(*quiet, total, "bytes")
	n := 0
	for ; rerr == nil; key, value, rerr = r.next() {
		if err := m.Put(key, value); err != nil {
			rerr = fmt.Errorf("line %d: %w", r.line, err)
			break
		}
		n++
		p.Set(r.bytesRead)
	}
	p.Done()
	if rerr != io.EOF {
		m.Close()
		return fmt.Errorf("%w (the %d entries before it are loaded)", rerr, n)
	}
	st := m.Stats()
	if err := m.Close(); err != nil {
		return err
	}
	if created {
		fmt.Fprintf(c.stdout, "created %s and loaded %d entries: room for %d entries to start, %d segments, %s\n",
			path, n, st.Capacity, st.Segments, cliargs.FormatSize(st.FileSize))
	} else {
		fmt.Fprintf(c.stdout, "loaded %d entries into %s: %d entries now, %d segments, %s\n",
			n, path, st.Len, st.Segments, cliargs.FormatSize(st.FileSize))
	}
	return nil
}

// sizeFlags are the flags of a layout, in the order errors name them.
var sizeFlags = []string{"entries", "avg-key", "avg-value", "max-key", "max-value", "segments", "max-file-size"}

// givenSizes returns the size flags given on the command line.
func givenSizes(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(sizeFlags, f.Name) {
			given[f.Name] = true
		}
	})
	return given
}

// field returns the value of the size flag name in l (0: not known).
func (l *layout) field(name string) int64 {
	switch name {
	case "entries":
		return int64(l.entries)
	case "avg-key":
		return int64(l.avgKey)
	case "avg-value":
		return int64(l.avgValue)
	case "max-key":
		return int64(l.maxKey)
	case "max-value":
		return int64(l.maxValue)
	case "segments":
		return int64(l.segments)
	case "max-file-size":
		return l.maxFileSize / fileAlign * fileAlign // as the library rounds it
	}
	return 0
}

// conflicts lists the given size flags of flags whose value differs from
// a known one of other, as "--entries 5 but entries=1000", or returns "".
func conflicts(flags, other layout, given map[string]bool) string {
	var bad []string
	for _, name := range sizeFlags {
		want, have := flags.field(name), other.field(name)
		if given[name] && have != 0 && want != have {
			bad = append(bad, fmt.Sprintf("--%s %d but %s=%d", name, want, name, have))
		}
	}
	return strings.Join(bad, ", ")
}

// fileConflict explains an ErrOptionsMismatch from opening FILE with the
// size flags: which flags differ from the file's layout.
func fileConflict(c *cli, path string, l layout, given map[string]bool, err error) error {
	m, oerr := openMap(path, readOnly)
	if oerr != nil {
		return err
	}
	have := layoutOf(m.Stats())
	m.Close()
	bad := conflicts(l, have, given)
	if bad == "" {
		return err
	}
	return c.usageError("size flags conflict with the layout of %s: %s; the size flags lay out a new map ('offmap copy' makes one of another layout)", path, bad)
}

// input opens the dump to load: the file named after FILE, or stdin. total
// is its size when known (a regular file), for the progress bar.
func (c *cli) input(pos []string) (io.ReadCloser, int64, error) {
	if len(pos) < 2 || pos[1] == "-" {
		if f, ok := c.stdin.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				return io.NopCloser(f), st.Size(), nil
			}
		}
		return io.NopCloser(c.stdin), 0, nil
	}
	f, err := os.Open(pos[1])
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}
