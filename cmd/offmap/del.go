package main

import "fmt"

var delCommand = command{
	name:     "del",
	synopsis: "[--hex] FILE KEY",
	summary:  "delete a key (exit 1 when absent)",
	help: `Del removes KEY and its value. It exits with status 1 when the key was
absent. With --hex, KEY is hexadecimal.`,
	examples: `  offmap del clients.map user1
  # delete if present, without failing a script when it is not
  offmap del clients.map user1 || true`,
	run: runDel,
}

func runDel(c *cli, args []string) error {
	fs := c.flags()
	isHex := hexFlag(fs)
	pos, err := c.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	key, err := decodeArg(pos[1], *isHex, "key")
	if err != nil {
		return err
	}
	m, err := openMap(pos[0], readWrite)
	if err != nil {
		return err
	}
	found, err := m.Delete(key)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err == nil && !found {
		return negative(fmt.Errorf("key %q not found", pos[1]))
	}
	return err
}
