package main

import (
	"errors"
	"fmt"

	"github.com/offmap/offmap/queue"
)

var verifyCommand = command{
	name:     "verify",
	synopsis: "DIR",
	summary:  "check every file of the queue (exit 1 when damaged)",
	help: `Verify checks every file of the queue without changing it: headers, the
chain of slots in each cycle file, write hints, the sparse index, the links
between cycles, writer leases and named tailers. It prints one line per
problem and exits 1 if there is any, 0 otherwise.

It also lists the indexes lost to writers that died mid-message: what a
crash leaves, not damage. A queue.meta that is empty, foreign, truncated,
of an unknown version or damaged gets a one-line error and status 1, as a
damaged file does in 'offmap verify'. It is safe while others append.`,
	examples: `  offqueue verify /var/queues/orders
  # in a script
  offqueue verify /var/queues/orders || echo "the orders queue is damaged" >&2`,
	run: runVerify,
}

func runVerify(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	q, err := openQueue(pos[0])
	if isFileDamage(err) {
		return negative(err)
	}
	if err != nil {
		return err
	}
	defer q.Close()
	lost, err := q.Check()
	var ce *queue.CheckError
	if err != nil && !errors.As(err, &ce) {
		return err
	}
	w := c.stdout
	for _, r := range lost {
		cyc, from := queue.SplitIndex(r.From)
		fmt.Fprintf(w, "lost %d:%d-%d:%d (%d messages whose writer died)\n", cyc, from, cyc, from+uint32(r.To-r.From)-1, r.To-r.From)
	}
	if ce != nil {
		for _, p := range ce.Problems {
			fmt.Fprintln(w, p)
		}
		fmt.Fprintf(w, "%d problems\n", len(ce.Problems))
		return errProblems
	}
	cs, _ := q.Cycles()
	fmt.Fprintf(w, "ok: %d cycle files, no problems\n", len(cs))
	return nil
}
