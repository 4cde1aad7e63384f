package main

import "fmt"

var sweepCommand = command{
	name:     "sweep",
	synopsis: "FILE",
	summary:  "delete the entries whose time to live has passed",
	help: `Sweep deletes every entry of a map made with --ttl (or --expiring) whose
expiry time has passed, and prints how many. Expired entries are never
returned by reads; writers that meet one reclaim its space, and sweep
reclaims all of them. It takes each segment's lock in turn, as any writer
does, so it may run while other processes use the map, from cron for
example. 'offmap stat' shows how many entries await it.`,
	examples: `  offmap sweep sessions.map
  # every minute
  * * * * * offmap sweep /var/lib/app/sessions.map`,
	run: runSweep,
}

func runSweep(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := mustExist(pos[0]); err != nil {
		return err
	}
	m, err := openMap(pos[0], readWrite)
	if err != nil {
		return err
	}
	defer m.Close()
	n, err := m.Sweep()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s: %d expired entries deleted, %d entries left\n", pos[0], n, m.Len())
	return nil
}
