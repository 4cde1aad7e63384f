package main

var putCommand = command{
	name:     "put",
	synopsis: "[--hex] FILE KEY VALUE",
	summary:  "set a key's value",
	help: `Put sets KEY's value, inserting the key if it is absent. With --hex, KEY
and VALUE are hexadecimal ("" is empty). It fails, changing nothing, when
the map is full or the key or value exceeds the map's limits.`,
	examples: `  offmap put clients.map user1 hello
  # binary bytes
  offmap put --hex clients.map 75736572ff 00010203`,
	run: runPut,
}

func runPut(c *cli, args []string) error {
	fs := c.flags()
	isHex := hexFlag(fs)
	pos, err := c.parse(fs, args, 3, 3)
	if err != nil {
		return err
	}
	key, err := decodeArg(pos[1], *isHex, "key")
	if err != nil {
		return err
	}
	value, err := decodeArg(pos[2], *isHex, "value")
	if err != nil {
		return err
	}
	m, err := openMap(pos[0], readWrite)
	if err != nil {
		return err
	}
	if err := m.Put(key, value); err != nil {
		m.Close()
		return err
	}
	return m.Close()
}
