package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/offmap/offmap/offmap"
)

var getCommand = command{
	name:     "get",
	synopsis: "[--hex | --int64] FILE KEY",
	summary:  "print a key's value (exit 1 when absent)",
	help: `Get prints KEY's value and a newline: the bytes as they are, in
hexadecimal with --hex (which also reads KEY as hexadecimal), or as a
decimal number with --int64 for the 8-byte little-endian counters that
'offmap incr' and value handles keep. It exits with status 1 when the key
is absent. It opens the file read-only.

A value that is not printable text is not written to a terminal: get
says to read it with --hex, or with --int64 when it is 8 bytes, and exits
with status 2. Redirected to a file or a pipe, the bytes go out as they
are.`,
	examples: `  offmap get clients.map user1
  offmap get --hex clients.map 75736572ff
  # a counter kept by 'offmap incr' or an Int64 handle
  offmap get --int64 clients.map user1-hits
  # a binary value, byte for byte, into a file
  offmap get clients.map user1-photo > photo.jpg`,
	run: runGet,
}

func runGet(c *cli, args []string) error {
	fs := c.flags()
	isHex := hexFlag(fs)
	asInt := fs.Bool("int64", false, "print an 8-byte little-endian value as a decimal integer")
	pos, err := c.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	if *isHex && *asInt {
		return c.usageError("--hex and --int64 exclude each other")
	}
	key, err := decodeArg(pos[1], *isHex, "key")
	if err != nil {
		return err
	}
	m, err := openMap(pos[0], readOnly)
	if err != nil {
		return err
	}
	defer m.Close()
	v, err := m.Get(key)
	switch {
	case errors.Is(err, offmap.ErrNotFound):
		return negative(fmt.Errorf("key %q not found", pos[1]))
	case err != nil:
		return err
	case *asInt && len(v) != 8:
		return fmt.Errorf("key %q holds a %d-byte value, not an 8-byte integer", pos[1], len(v))
	case *asInt:
		fmt.Fprintln(c.stdout, int64(binary.LittleEndian.Uint64(v)))
	case !*isHex && c.stdoutTTY && !printableText(v):
		how := "--hex"
		if len(v) == 8 {
			how = "--hex, or with --int64 if it is a counter"
		}
		return fmt.Errorf("key %q holds %d bytes that are not printable text: read them with %s (or redirect stdout to get the bytes as they are)", pos[1], len(v), how)
	default:
		fmt.Fprintln(c.stdout, encodeOut(v, *isHex))
	}
	return nil
}

// printableText reports whether b is UTF-8 text that a terminal shows as
// it is: no control characters other than tabs and newlines.
func printableText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r != '\t' && r != '\n' && !unicode.IsGraphic(r) {
			return false
		}
	}
	return true
}
