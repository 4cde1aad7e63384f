package main

var dumpCommand = command{
	name:     "dump",
	synopsis: "[--hex] [--json] [--quiet] FILE",
	summary:  "print every entry, as text or JSON lines",
	help: `Dump prints every entry, one per line, in a form that 'offmap load' reads
back exactly, whatever bytes the keys and values hold:

  "user1" "hello"                      text: Go-quoted strings (the default)
  7573657231 68656c6c6f                --hex: hexadecimal; an empty field is ""
  {"key":"user1","value":"hello"}      --json: JSON lines; bytes that are not
  {"key":"user2","value_hex":"ff00"}   UTF-8 text go in "key_hex"/"value_hex"

Text and hex dumps start with a '#' line giving the map's layout, from which
load creates a missing file. Each segment is read at one instant, so a
dump of a map in use holds every entry that was present throughout. It
opens the file read-only. On a terminal, stderr shows a progress bar
while stdout goes to a file or pipe.`,
	examples: `  offmap dump clients.map > clients.txt
  # copy a map into a new file of the same layout
  offmap dump clients.map | offmap load copy.map
  offmap dump --json clients.map | jq -r .key`,
	run: runDump,
}

func runDump(c *cli, args []string) error {
	fs := c.flags()
	d := dumpWriter{w: c.stdout}
	fs.BoolVar(&d.hex, "hex", false, "keys and values in hexadecimal")
	fs.BoolVar(&d.json, "json", false, "JSON lines")
	quiet := fs.Bool("quiet", false, "no progress bar")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	m, err := openMap(pos[0], readOnly)
	if err != nil {
		return err
	}
	defer m.Close()
	st := m.Stats()
	if err := d.header(layoutOf(st)); err != nil {
		return err
	}
	// A progress bar would mix with entries printed on the terminal.
	p := c.newProgress(*quiet || c.stdoutTTY, int64(st.Len), "entries")
	var werr error
	err = m.Range(func(k, v []byte) bool {
		werr = d.write(k, v)
		p.Add(1)
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = c.stdout.Flush()
	}
	p.Done()
	return err
}
