package main

import "fmt"

var createCommand = command{
	name:     "create",
	synopsis: "FILE --entries N --avg-key BYTES --avg-value BYTES [flags]",
	summary:  "make a new, empty map file",
	help: `Create makes a new map file sized for --entries entries of the average
sizes. Its capacity is fixed: 'offmap copy' makes a larger one later. It
refuses to overwrite an existing file.`,
	examples: `  # a map for a million 16-byte keys with 8-byte values
  offmap create clients.map --entries 1000000 --avg-key 16 --avg-value 8
  # allow values of up to 64 KiB, readable by the group
  offmap create blobs.map --entries 10000 --avg-key 32 --avg-value 2048 \
      --max-value 65536 --mode 0640`,
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
	m, err := createMap(c, pos[0], l)
	if err != nil {
		return err
	}
	st := m.Stats()
	if err := m.Close(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "created %s: capacity %d entries, %d segments, %s\n",
		pos[0], st.Capacity, st.Segments, humanBytes(st.FileSize))
	return nil
}
