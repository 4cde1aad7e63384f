// Command queuepair is a producer and a consumer of one queue, run as two
// processes, in two terminals:
//
//	go run ./examples/queuepair produce DIR    # appends an order every 500 ms
//	go run ./examples/queuepair consume DIR    # prints each order as it comes
//
// The consumer sleeps until an append in the other process wakes it (no
// polling), and keeps its position in the queue under a name: stopped
// with Ctrl-C and started again, it goes on after the last order it
// printed. Start them in either order, and as many producers as you like.
//
// Flags, before DIR: produce -n (how many orders; 0 without end) and
// -every (the pause between them); consume -n (stop after so many; 0 runs
// until interrupted).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/offmap/offmap/queue"
)

const usage = `usage:
  queuepair produce [-n N] [-every D] DIR
  queuepair consume [-n N] DIR`

// errUsage: the command line is wrong; main prints the usage.
var errUsage = errors.New("bad usage")

func main() {
	err := run(os.Args[1:])
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "queuepair:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "produce" && args[0] != "consume") {
		return errUsage
	}
	fs := flag.NewFlagSet("queuepair "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var n int
	var every time.Duration
	if args[0] == "produce" {
		fs.IntVar(&n, "n", 20, "how many orders (0: no limit)")
		fs.DurationVar(&every, "every", 500*time.Millisecond, "pause between orders")
	} else {
		fs.IntVar(&n, "n", 0, "stop after so many orders (0: run until interrupted)")
	}
	switch err := fs.Parse(args[1:]); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Println(usage)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		return nil
	case err != nil:
		fmt.Fprintln(os.Stderr, "queuepair:", err)
		return errUsage
	case fs.NArg() != 1:
		return errUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if args[0] == "produce" {
		return produce(ctx, fs.Arg(0), n, every)
	}
	return consume(ctx, fs.Arg(0), n)
}

// produce appends n orders (without end if n is 0), printing each.
func produce(ctx context.Context, dir string, n int, every time.Duration) error {
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		return err
	}
	defer q.Close()
	for i := 1; n == 0 || i <= n; i++ {
		msg := fmt.Sprintf("order %d from process %d", i, os.Getpid())
		if _, err := q.Append([]byte(msg)); err != nil {
			return err
		}
		fmt.Println(msg)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
	return nil
}

// consume prints the orders after the last one it acknowledged, until it
// has printed n (without end if n is 0) or is interrupted.
func consume(ctx context.Context, dir string, n int) error {
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		return err
	}
	defer q.Close()
	t, err := q.NamedTailer("queuepair")
	if err != nil {
		return err
	}
	defer t.Close()
	for seen := 0; n == 0 || seen < n; {
		_, msg, err := t.Next() // msg is a view into the file
		if errors.Is(err, queue.ErrNoMessage) {
			if err := t.Wait(ctx, queue.Block); err != nil {
				if ctx.Err() != nil {
					return nil // interrupted: everything printed is acknowledged
				}
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s\n", msg)
		seen++
		if err := t.Ack(); err != nil { // printed: a restart goes on after it
			return err
		}
	}
	return nil
}
