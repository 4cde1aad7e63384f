package main

import (
	"errors"
	"fmt"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/offmap"
)

var upgradeCommand = command{
	name:     "upgrade",
	synopsis: "FILE",
	summary:  "rewrite a map file of an older format version as the current one",
	help: `Upgrade rewrites a map file of format version 1, from before maps could
grow, as a map of the current version, which every other command and the
library refuse to open until then. The new map keeps the old one's
entries, layout (--entries, key and value sizes, segments) and
permission; it may grow to the default maximum file size ('offmap copy
--max-file-size' sets another). Entries deleted while value handles
pinned them are dropped.

No process may have the map open: upgrade refuses a map in use, and
changes nothing. It builds the new file next to the old one and renames
it over FILE only when complete, so that FILE holds the old map or the new
one, whatever happens; it needs room for both meanwhile. A damaged file
is refused (a release that reads version 1 can 'offmap recover' it
first). A file already of the current version is left as it is, with
status 0.`,
	examples: `  offmap upgrade clients.map
  # every map of a directory
  for f in /var/lib/app/*.map; do offmap upgrade "$f"; done`,
	run: runUpgrade,
}

func runUpgrade(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	path := pos[0]
	if err := mustExist(path); err != nil {
		return err
	}
	n, uerr := offmap.Upgrade(path)
	if uerr != nil && !errors.Is(uerr, offmap.ErrCurrent) {
		return uerr
	}
	m, err := openMap(path, readOnly)
	if err != nil {
		return err
	}
	st := m.Stats()
	m.Close()
	if uerr != nil {
		fmt.Fprintf(c.stdout, "%s: already format version %d; nothing to do\n", path, st.FormatVersion)
		return nil
	}
	fmt.Fprintf(c.stdout, "upgraded %s to format version %d: %d entries copied, room for %d entries to start, %d segments, %s (grows to at most %s)\n",
		path, st.FormatVersion, n, st.Capacity, st.Segments, cliargs.FormatSize(st.FileSize), cliargs.FormatSize(st.MaxFileSize))
	return nil
}
