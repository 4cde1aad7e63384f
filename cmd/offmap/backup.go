package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
)

var backupCommand = command{
	name:     "backup",
	synopsis: "[--json] FILE DEST",
	summary:  "copy a map in use, consistent at one instant, into a new file",
	help: `Backup writes DEST, a new map file holding every entry of FILE as it was
at one instant, while other processes keep reading and writing FILE: every
UpdateKeys is in the copy entirely or not at all, and every write that
returned before the instant is in it. Readers do not wait; a writer waits
at most until the backup has copied its segment into memory (the 'stall'
printed). DEST is compact, as 'offmap copy' makes one, keeps FILE's
layout, permission, checksums and expiry times, and is used as it is:
restore by stopping the processes that use FILE and moving DEST over it
(docs/OPERATIONS.md).

DEST must not exist; it appears only when complete and synced, so a
backup that fails or is killed leaves nothing at DEST and FILE as it was.
The backup takes segment locks: it needs write permission on FILE, and
memory for about FILE's entry space (the copy is made in memory first,
so that writers wait only for that).
'offmap dump' is not a backup: it reads each segment at its own instant.`,
	examples: `  offmap backup clients.map /backup/clients-$(date +%F).map
  offmap backup --json clients.map clients.bak | jq .entries`,
	run: runBackup,
}

// backupJSON is backup --json's output.
type backupJSON struct {
	Path     string    `json:"path"`
	Dest     string    `json:"dest"`
	Entries  int       `json:"entries"`
	At       time.Time `json:"at"`
	StallNS  int64     `json:"stall_ns"`
	FileSize int64     `json:"file_size"`
}

func runBackup(c *cli, args []string) error {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := c.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	src, dest := pos[0], pos[1]
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%s already exists", dest)
	}
	m, err := openMap(src, readWrite)
	if err != nil {
		return err
	}
	defer m.Close()
	info, err := m.BackupTo(dest)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(backupJSON{src, dest, info.Entries, info.At.UTC(), info.Stall.Nanoseconds(), info.FileSize})
	}
	fmt.Fprintf(c.stdout, "backed up %d entries of %s at %s to %s (%s); segment locks held %s\n",
		info.Entries, src, info.At.UTC().Format(time.RFC3339Nano), dest, cliargs.FormatSize(info.FileSize), info.Stall.Round(time.Microsecond))
	return nil
}
