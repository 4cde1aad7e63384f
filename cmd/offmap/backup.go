package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/offmap"
)

var backupCommand = command{
	name:     "backup",
	synopsis: "[--json] FILE DEST|-",
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
'offmap dump' is not a backup: it reads each segment at its own instant.

With DEST '-' the copy's bytes go to standard output instead, for a pipe
(gzip, ssh): the same map file, built in an unnamed temporary file
beside FILE (or in $TMPDIR when FILE's directory is not writable) after
every segment lock is released, so a slow pipe stalls no writer. The
summary (and --json's object) then goes to standard error. It refuses to
write a map file to a terminal. Restore by unpacking the stream into a
file, which 'offmap verify' checks and Open uses as it is.`,
	examples: `  offmap backup clients.map /backup/clients-$(date +%F).map
  offmap backup --json clients.map clients.bak | jq .entries
  offmap backup clients.map - | gzip >clients-$(date +%F).map.gz
  gunzip <clients-2026-12-03.map.gz >clients.map && offmap verify clients.map`,
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
	toStdout := dest == "-"
	switch {
	case toStdout && c.stdoutTTY:
		return fmt.Errorf("standard output is a terminal: redirect the map file's bytes to a file or a pipe (offmap backup %s - | gzip >backup.map.gz)", src)
	case toStdout:
	default:
		if _, err := os.Lstat(dest); err == nil {
			return fmt.Errorf("%s already exists", dest)
		}
	}
	m, err := openMap(src, readWrite)
	if err != nil {
		return err
	}
	defer m.Close()
	var info offmap.BackupInfo
	summary := io.Writer(c.stdout)
	if toStdout {
		info, err = m.Backup(c.stdout)
		summary = c.stderr
	} else {
		info, err = m.BackupTo(dest)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(summary).Encode(backupJSON{src, dest, info.Entries, info.At.UTC(), info.Stall.Nanoseconds(), info.FileSize})
	}
	to := dest
	if toStdout {
		to = "standard output"
	}
	fmt.Fprintf(summary, "backed up %d entries of %s at %s to %s (%s); segment locks held %s\n",
		info.Entries, src, info.At.UTC().Format(time.RFC3339Nano), to, cliargs.FormatSize(info.FileSize), info.Stall.Round(time.Microsecond))
	return nil
}
