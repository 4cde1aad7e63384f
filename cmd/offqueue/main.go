// Command offqueue inspects and feeds an offmap queue: dump its messages,
// follow it like tail -f, print its statistics, append lines from stdin.
//
//	offqueue dump [-hex] [-from INDEX] [-n COUNT] DIR
//	offqueue follow [-hex] [-from start|end|INDEX] DIR
//	offqueue stats DIR
//	offqueue verify DIR
//	offqueue append DIR < lines
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/offmap/offmap/queue"
)

type command struct {
	name, args, about, example string
	run                        func(fs *flag.FlagSet, args []string, out io.Writer) error
	flags                      func(fs *flag.FlagSet)
}

var commands = []*command{dumpCmd, followCmd, statsCmd, verifyCmd, appendCmd}

// errUsage marks an error in the command line (exit status 2).
var errUsage = errors.New("usage")

// errProblems marks a verify that found damage (exit status 1, and
// nothing more printed: the problems are already on standard output).
var errProblems = errors.New("problems found")

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		fs := flag.NewFlagSet("offqueue "+c.name, flag.ContinueOnError)
		fs.SetOutput(stderr)
		if c.flags != nil {
			c.flags(fs)
		}
		fs.Usage = func() {
			fmt.Fprintf(stderr, "usage: offqueue %s %s\n\n%s\n\n", c.name, c.args, c.about)
			fs.PrintDefaults()
			fmt.Fprintf(stderr, "\nexample:\n  %s\n", c.example)
		}
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		stdinReader = stdin
		if err := c.run(fs, fs.Args(), stdout); err != nil {
			if errors.Is(err, errProblems) {
				return 1
			}
			fmt.Fprintf(stderr, "offqueue %s: %v\n", c.name, err)
			if errors.Is(err, errUsage) {
				return 2
			}
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "offqueue: unknown command %q (try offqueue --help)\n", args[0])
	return 2
}

var stdinReader io.Reader = os.Stdin

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: offqueue COMMAND [flags] DIR")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, strings.SplitN(c.about, "\n", 2)[0])
	}
	fmt.Fprintln(w, "\nRun offqueue COMMAND --help for its flags and an example.")
}

func oneDir(args []string) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("%w: want one queue directory, got %d arguments", errUsage, len(args))
	}
	return args[0], nil
}

var (
	hexOut   bool
	fromFlag string
	count    int
)

// printMsg writes one message as "index length payload": the payload as
// text when it is printable UTF-8, else (or with -hex) as hex.
func printMsg(w io.Writer, idx uint64, msg []byte) error {
	c, s := queue.SplitIndex(idx)
	var payload string
	if !hexOut && printable(msg) {
		payload = strconv.Quote(string(msg))
	} else {
		payload = hex.EncodeToString(msg)
	}
	_, err := fmt.Fprintf(w, "%d:%d\t%d\t%s\n", c, s, len(msg), payload)
	return err
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

// parseIndex reads an index as CYCLE:SEQ or as one number.
func parseIndex(s string) (uint64, error) {
	if c, q, ok := strings.Cut(s, ":"); ok {
		cv, err1 := strconv.ParseUint(c, 10, 32)
		qv, err2 := strconv.ParseUint(q, 10, 32)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("%w: bad index %q (want CYCLE:SEQ)", errUsage, s)
		}
		return queue.Index(uint32(cv), uint32(qv)), nil
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: bad index %q (want CYCLE:SEQ)", errUsage, s)
	}
	return v, nil
}

// position moves t as -from says.
func position(t *queue.Tailer, from string) error {
	switch from {
	case "", "start":
		return t.SeekStart()
	case "end":
		return t.SeekEnd()
	}
	idx, err := parseIndex(from)
	if err != nil {
		return err
	}
	return t.Seek(idx)
}

var dumpCmd = &command{
	name:    "dump",
	args:    "[-hex] [-from INDEX] [-n COUNT] DIR",
	about:   "Print the queue's messages, one per line: CYCLE:SEQ, length, payload\n(quoted text, or hex when not printable or with -hex).",
	example: "offqueue dump -from 20458:100 -n 10 /var/queues/orders",
	flags: func(fs *flag.FlagSet) {
		fs.BoolVar(&hexOut, "hex", false, "print every payload in hex")
		fs.StringVar(&fromFlag, "from", "start", "first message: start, end or an index CYCLE:SEQ")
		fs.IntVar(&count, "n", 0, "print at most this many messages (0: all)")
	},
	run: func(fs *flag.FlagSet, args []string, out io.Writer) error {
		dir, err := oneDir(args)
		if err != nil {
			return err
		}
		q, t, err := openTail(dir, true)
		if err != nil {
			return err
		}
		defer q.Close()
		if err := position(t, fromFlag); err != nil {
			return err
		}
		w := bufio.NewWriter(out)
		defer w.Flush()
		for n := 0; count <= 0 || n < count; n++ {
			idx, msg, err := t.Next()
			if err == queue.ErrNoMessage {
				return nil
			}
			if err != nil {
				return err
			}
			if err := printMsg(w, idx, msg); err != nil {
				return err
			}
		}
		return nil
	},
}

var followCmd = &command{
	name:    "follow",
	args:    "[-hex] [-from start|end|INDEX] DIR",
	about:   "Print messages as they are appended, like tail -f, until interrupted.\nIt sleeps while the queue is idle and wakes within microseconds of an append.",
	example: "offqueue follow -from end /var/queues/orders",
	flags: func(fs *flag.FlagSet) {
		fs.BoolVar(&hexOut, "hex", false, "print every payload in hex")
		fs.StringVar(&fromFlag, "from", "end", "first message: start, end or an index CYCLE:SEQ")
	},
	run: func(fs *flag.FlagSet, args []string, out io.Writer) error {
		dir, err := oneDir(args)
		if err != nil {
			return err
		}
		// Read-write when allowed: a read-only process cannot watch the
		// doorbell, and would poll instead.
		q, t, err := openTail(dir, false)
		if err != nil {
			return err
		}
		defer q.Close()
		if err := position(t, fromFlag); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		w := bufio.NewWriter(out)
		defer w.Flush()
		for {
			if err := t.Wait(ctx, queue.Block); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for {
				idx, msg, err := t.Next()
				if err == queue.ErrNoMessage {
					break
				}
				if err != nil {
					return err
				}
				if err := printMsg(w, idx, msg); err != nil {
					return err
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	},
}

var statsCmd = &command{
	name:    "stats",
	args:    "DIR",
	about:   "Print the queue's settings, cycle files, writers and named tailers.",
	example: "offqueue stats /var/queues/orders",
	run: func(fs *flag.FlagSet, args []string, out io.Writer) error {
		dir, err := oneDir(args)
		if err != nil {
			return err
		}
		q, err := queue.Open(dir, queue.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer q.Close()
		st, err := q.Stats()
		if err != nil {
			return err
		}
		w := bufio.NewWriter(out)
		defer w.Flush()
		fmt.Fprintf(w, "queue      %s\nformat     %d\nroll       %v\nspacing    %d\nmax cycle  %d bytes\ncreated    %s\n",
			st.Dir, st.FormatVersion, st.Roll, st.IndexSpacing, st.MaxCycleSize, st.Created.UTC().Format("2006-01-02 15:04:05"))
		fmt.Fprintf(w, "writers    %v\nwatchers   %d\n", st.Writers, st.Watchers)
		var total uint64
		fmt.Fprintf(w, "cycles     %d\n", len(st.Cycles))
		for _, c := range st.Cycles {
			state := "open"
			if c.Sealed {
				state = "sealed"
			}
			if c.Err != nil {
				state = "error: " + c.Err.Error()
			}
			fmt.Fprintf(w, "  %-10d %10d messages %12d bytes used %12d file  %s\n", c.Cycle, c.Messages, c.BytesUsed, c.FileSize, state)
			total += uint64(c.Messages)
		}
		fmt.Fprintf(w, "messages   %d\n", total)
		for _, t := range st.Tailers {
			pos := "nothing acknowledged"
			if t.Any {
				c, s := queue.SplitIndex(t.Acked)
				pos = fmt.Sprintf("acknowledged up to %d:%d", c, s)
			}
			fmt.Fprintf(w, "tailer     %s: %s\n", t.Name, pos)
		}
		return nil
	},
}

var verifyCmd = &command{
	name:    "verify",
	args:    "DIR",
	about:   "Check every file of the queue without changing it: headers, the chain of\nslots in each cycle file, write hints, the sparse index, the links between\ncycles, writer leases and named tailers. Prints one line per problem and\nexits 1 if there is any; lists the indexes lost to writers that died\nmid-message (what a crash leaves, not damage). Safe while others append.",
	example: "offqueue verify /var/queues/orders",
	run: func(fs *flag.FlagSet, args []string, out io.Writer) error {
		dir, err := oneDir(args)
		if err != nil {
			return err
		}
		q, err := queue.Open(dir, queue.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		defer q.Close()
		lost, err := q.Check()
		var ce *queue.CheckError
		if err != nil && !errors.As(err, &ce) {
			return err
		}
		w := bufio.NewWriter(out)
		defer w.Flush()
		for _, r := range lost {
			c, from := queue.SplitIndex(r.From)
			fmt.Fprintf(w, "lost %d:%d-%d:%d (%d messages whose writer died)\n", c, from, c, from+uint32(r.To-r.From)-1, r.To-r.From)
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
	},
}

var appendCmd = &command{
	name:    "append",
	args:    "DIR",
	about:   "Append each line of standard input (without its newline) as a message,\ncreating the queue if needed, and print the index of the last one.",
	example: "printf 'hello\\nworld\\n' | offqueue append /tmp/q",
	run: func(fs *flag.FlagSet, args []string, out io.Writer) error {
		dir, err := oneDir(args)
		if err != nil {
			return err
		}
		q, err := queue.Open(dir, queue.Options{})
		if err != nil {
			return err
		}
		defer q.Close()
		sc := bufio.NewScanner(stdinReader)
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
			c, s := queue.SplitIndex(last)
			fmt.Fprintf(out, "appended %d messages, last %d:%d\n", n, c, s)
		}
		return nil
	},
}

// openTail opens an existing queue (never creating one) and a tailer.
func openTail(dir string, readOnly bool) (*queue.Queue, *queue.Tailer, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, err
	}
	q, err := queue.Open(dir, queue.Options{ReadOnly: true})
	if err == nil && !readOnly {
		q.Close()
		q, err = queue.Open(dir, queue.Options{})
	}
	if err != nil {
		return nil, nil, err
	}
	t, err := q.Tailer()
	if err != nil {
		q.Close()
		return nil, nil, err
	}
	return q, t, nil
}
