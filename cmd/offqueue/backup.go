package main

import (
	"encoding/json"
	"fmt"
	"os"
)

var backupCommand = command{
	name:     "backup",
	synopsis: "[--json] DIR DEST",
	summary:  "copy a queue in use, up to a committed index, into a new directory",
	help: `Backup copies the queue in DIR into a new directory DEST while other
processes keep appending and reading: every cycle file up to the first
message a writer has not completed, so that the copy ends at a committed
index (the 'end' printed: every message before it is in the copy, in
order, none after), with the named tailers' positions (one past the end is
brought back to it). The copy has no writers; queue.Open and 'offqueue
verify' use it as it is, and appenders continue it.

DEST must not exist; it is built under a temporary name beside it and
renamed when complete and synced, so a backup that fails or is killed
leaves nothing at DEST. A killed one leaves its temporary directory
(.DEST.backup-PID); the next backup into the same directory removes it
when no other backup is running there, which every backup shows by
holding a lock on the file .offqueue-backup.lock there (left in place).
It opens DIR read-only and changes nothing.`,
	examples: `  offqueue backup /var/queues/orders /backup/orders-$(date +%F)
  offqueue backup --json /var/queues/orders /backup/orders.1 | jq .end_index`,
	run: runBackup,
}

// backupJSON is backup --json's output.
type backupJSON struct {
	Dir      string   `json:"dir"`
	Dest     string   `json:"dest"`
	End      uint64   `json:"end_index"` // after the last message copied
	EndText  string   `json:"end"`       // CYCLE:SEQ
	Messages int64    `json:"messages"`
	Cycles   []uint32 `json:"cycles"`
	Tailers  int      `json:"tailers"`
}

func runBackup(c *cli, args []string) error {
	fs := c.flags()
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := c.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	dir, dest := pos[0], pos[1]
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("%s already exists", dest)
	}
	q, err := openQueue(dir)
	if err != nil {
		return err
	}
	defer q.Close()
	info, err := q.Backup(dest)
	if err != nil {
		return err
	}
	out := backupJSON{dir, dest, info.End, formatIndex(info.End), info.Messages, append([]uint32{}, info.Cycles...), info.Tailers}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(out)
	}
	fmt.Fprintf(c.stdout, "backed up %d messages of %s to %s: %d cycle files, end %s, %d named tailers\n",
		out.Messages, dir, dest, len(out.Cycles), out.EndText, out.Tailers)
	return nil
}
