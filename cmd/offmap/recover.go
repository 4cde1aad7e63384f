package main

import (
	"fmt"
	"time"

	"github.com/offmap/offmap/offmap"
)

var recoverCommand = command{
	name:     "recover",
	synopsis: "[--timeout DURATION] FILE",
	summary:  "repair what crashed processes left behind",
	help: `Recover repairs what a crash or damage left in the map: it takes over
segment locks held by dead processes, finishes or undoes writes that were
cut off (an interrupted in-place update is completed from its redo record,
a half-done insert is dropped), drops entries that damage made
unreadable, and rebuilds counts and free-space bitmaps. It prints one line
per problem fixed. Entries whose writes completed are never lost.

It is safe while other processes use the map: it locks one segment at a
time, and they wait for that segment only. If a live process holds a
segment's lock for longer than --timeout, recover stops with an error and
changes nothing more. A file cut short (shorter than the tables and
extents its segments name, which every other command refuses) loses what
was cut: recover drops those tables and extents, prints them, and exits 1;
run again, it finds nothing more to drop. A damaged header cannot be
repaired: copy what can still be read with 'offmap dump' instead.`,
	examples: `  offmap recover clients.map
  offmap verify clients.map || offmap recover clients.map`,
	run: runRecover,
}

func runRecover(c *cli, args []string) error {
	fs := c.flags()
	timeout := fs.Duration("timeout", 30*time.Second, "wait at most `DURATION` (such as 5s) for a segment lock held by a live process")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *timeout <= 0 {
		return c.usageError("--timeout must be positive")
	}
	// A process that opens the map alone repairs dead processes' leftovers
	// at once; Recover reports them with its own findings.
	m, err := openMap(pos[0], offmap.Options{LockTimeout: *timeout, OpenDamaged: true})
	if err != nil {
		return err
	}
	fixed, err := m.Recover()
	for _, f := range fixed {
		fmt.Fprintf(c.stdout, "fixed: %s\n", f)
	}
	if err != nil {
		m.Close()
		return err
	}
	if err := m.Close(); err != nil {
		return err
	}
	if len(fixed) == 0 {
		fmt.Fprintf(c.stdout, "%s: nothing to repair\n", pos[0])
	} else {
		fmt.Fprintf(c.stdout, "%s: repaired %d problems\n", pos[0], len(fixed))
	}
	return nil
}
