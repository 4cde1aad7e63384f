package main

import (
	"bufio"
	"fmt"

	"github.com/offmap/offmap/queue"
)

var appendCommand = command{
	name:     "append",
	synopsis: "DIR",
	summary:  "append each line of stdin as a message",
	help: `Append appends each line of standard input, without its line end, as a
message, creating the queue (daily roll) if DIR does not exist or is
empty, and prints how many it appended and the index CYCLE:SEQ of the
last one. --checksum-messages makes a new queue's messages carry
checksums, which every read checks (the queue's choice for its life).`,
	examples: `  # prints "appended 2 messages, last 0:1" on a new daily queue
  printf 'hello\nworld\n' | offqueue append /tmp/q
  offqueue append /var/queues/orders < orders.txt`,
	run: runAppend,
}

func runAppend(c *cli, args []string) error {
	fs := c.flags()
	sums := fs.Bool("checksum-messages", false, "a new queue's messages carry checksums (refused for an existing queue without them)")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	q, err := queue.Open(pos[0], queue.Options{ChecksumMessages: *sums})
	if err != nil {
		return err
	}
	defer q.Close()
	sc := bufio.NewScanner(c.stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	n := 0
	var last uint64
	for sc.Scan() {
		if last, err = q.Append(sc.Bytes()); err != nil {
			return err
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(c.stdout, "appended %d messages, last %s\n", n, formatIndex(last))
	}
	return nil
}
