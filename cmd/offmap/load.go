package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/offmap/offmap/offmap"
)

var loadCommand = command{
	name:     "load",
	synopsis: "[--entries N --avg-key BYTES --avg-value BYTES ...] [--quiet] FILE [INPUT]",
	summary:  "put entries read in dump format (from stdin or INPUT)",
	help: `Load reads entries in any of dump's forms (text, hex or JSON lines, even
mixed) from INPUT, or stdin when INPUT is absent or "-", and puts each into
the map, replacing the value of a key already present. 'offmap dump A |
offmap load B' makes B hold exactly A's entries.

When FILE does not exist, load creates it with the layout of the dump's
'#' layout line, or of the size flags, which override that line. A JSON
dump has no layout line: give --entries, --avg-key and --avg-value.

A malformed line stops the load with its line number; the entries before it
stay loaded. On a terminal, stderr shows a progress bar.`,
	examples: `  offmap dump old.map | offmap load new.map
  # into a new map twice as large
  offmap load --entries 2000000 new.map old.txt
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
	var m *offmap.Map
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if r.hasLayout {
			l.fill(r.layout)
		}
		m, err = createMap(c, path, l)
		if err != nil {
			return err
		}
	} else {
		opts := l.options()
		opts.FileMode = 0
		if m, err = openMap(path, opts); err != nil {
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
	return m.Close()
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
