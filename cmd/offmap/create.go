package main

import (
	"fmt"

	"github.com/offmap/offmap/internal/cliargs"
)

var createCommand = command{
	name:     "create",
	synopsis: "FILE [size flags] [--evict --checksums --ttl D --mode M]",
	summary:  "make a new, empty map file",
	help: `Create makes a new map file with room for --entries entries of the
average sizes to start. That is where the map starts, not a limit: as it
fills, its segments take larger slot tables and more entry space from the
end of the file, which grows up to --max-file-size; only there is the map
full. With no size flags the map starts small (1024 entries of 32-byte
keys and 64-byte values, 16 segments, a file of 384 KiB) and takes keys
of up to 256 bytes and values of up to 4096. --entries and the averages
are hints; --max-key, --max-value and --max-file-size are limits, and
--segments is fixed (a segment holds at most about 891,000 entries). It
refuses to overwrite an existing file. With --evict the map is a cache:
--entries and --max-file-size are bounds it never passes, and a put that
needs room evicts entries unlikely to be read again instead of failing.`,
	examples: `  # a small map that grows as it fills
  offmap create new.map
  # a map that will hold a million 16-byte keys with 8-byte values
  offmap create clients.map --entries 1e6 --avg-key 16 --avg-value 8
  # allow values of up to 64 KiB, readable by the group
  offmap create blobs.map --entries 10000 --avg-key 32 --avg-value 2KiB \
      --max-value 64KiB --mode 0640
  # a cache shared by the processes of the host: 100,000 entries, 64 MiB
  offmap create cache.map --evict --entries 100000 --avg-value 256 \
      --max-file-size 64MiB
  # a map whose file never grows past 16 MiB
  offmap create small.map --entries 1000 --avg-key 16 --avg-value 64 \
      --max-file-size 16MiB`,
	run: runCreate,
}

func runCreate(c *cli, args []string) error {
	fs := c.flags()
	var l layout
	l.define(fs)
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := l.check(c, fs); err != nil {
		return err
	}
	m, err := createMap(pos[0], l)
	if err != nil {
		return err
	}
	st := m.Stats()
	if err := m.Close(); err != nil {
		return err
	}
	if st.Evict {
		fmt.Fprintf(c.stdout, "created %s: a cache of at most %d entries, %d segments, %s (grows to at most %s, then evicts)\n",
			pos[0], st.EvictBound, st.Segments, cliargs.FormatSize(st.FileSize), cliargs.FormatSize(st.MaxFileSize))
		return nil
	}
	fmt.Fprintf(c.stdout, "created %s: room for %d entries to start, %d segments, %s (grows to at most %s)\n",
		pos[0], st.Capacity, st.Segments, cliargs.FormatSize(st.FileSize), cliargs.FormatSize(st.MaxFileSize))
	return nil
}
