package main

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/offmap/offmap/offmap"
)

var incrCommand = command{
	name:     "incr",
	synopsis: "[--hex] FILE KEY [DELTA]",
	summary:  "add to an 8-byte integer value and print the result",
	help: `Incr adds DELTA (default 1, may be negative) to KEY's value, an 8-byte
little-endian int64 as kept by Int64 value handles (AcquireInt64), and
prints the new value. An absent key counts as 0 and is created. The
addition is atomic: no increment by another process, through incr, Update
or a value handle, is lost. It wraps around on overflow, like the handle's
Add. Unlike acquiring a handle, it does not pin the entry, so the key's
value may later be replaced by one of another size.`,
	examples: `  offmap incr clients.map user1-hits
  offmap incr clients.map user1-hits 10
  offmap incr clients.map user1-hits -3`,
	run: runIncr,
}

func runIncr(c *cli, args []string) error {
	fs := c.flags()
	isHex := hexFlag(fs)
	pos, err := c.parse(fs, args, 2, 3)
	if err != nil {
		return err
	}
	key, err := decodeArg(pos[1], *isHex, "key")
	if err != nil {
		return err
	}
	delta := int64(1)
	if len(pos) == 3 {
		if delta, err = strconv.ParseInt(pos[2], 10, 64); err != nil {
			return c.usageError("DELTA %q is not a 64-bit integer", pos[2])
		}
	}
	m, err := openMap(pos[0], readWrite)
	if err != nil {
		return err
	}
	var result int64
	var wrongSize int
	var buf [8]byte
	// Update runs fn under the segment lock and stores its result with a
	// compare-and-swap against value handles: fn may run more than once,
	// and the last run is the one stored.
	err = m.Update(key, func(v []byte, found bool) ([]byte, offmap.Op) {
		wrongSize = -1
		var n int64
		if found {
			if len(v) != 8 {
				wrongSize = len(v)
				return nil, offmap.OpNone
			}
			n = int64(binary.LittleEndian.Uint64(v))
		}
		result = n + delta
		binary.LittleEndian.PutUint64(buf[:], uint64(result))
		return buf[:], offmap.OpPut
	})
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return err
	case wrongSize >= 0:
		return fmt.Errorf("key %q holds a %d-byte value, not an 8-byte integer", pos[1], wrongSize)
	}
	fmt.Fprintln(c.stdout, result)
	return nil
}
