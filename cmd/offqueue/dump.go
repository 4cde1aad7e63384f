package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/queue"
)

// indexHelp explains the indexes that dump and follow print and that
// --from takes.
const indexHelp = `SEQ numbers the messages of one cycle file from 0. CYCLE numbers the roll
cycles from 00:00 UTC on the day the queue was created: a daily queue's
first file is cycle 0 and the next day's is cycle 1; an hourly queue
created at 14:30 UTC starts at cycle 14. --from takes an index as printed.`

var dumpCommand = command{
	name:     "dump",
	synopsis: "[format flags] [--from INDEX | --last N] [-n COUNT] DIR",
	summary:  "print the queue's messages, one per line",
	help: `Dump prints the queue's messages, oldest first, one per line: the index
CYCLE:SEQ, the payload's length and the payload, as quoted text, or in
hexadecimal when it is not printable text (always with --hex). The first
two messages of a new daily queue:

  0:0	5	"hello"
  0:1	2	ff00

` + indexHelp + `

With --json each message is a JSON object on its own line, its payload in
"payload" when it is UTF-8 text and in "payload_hex" otherwise (always
with --hex):

  {"index":"0:0","cycle":0,"seq":0,"length":5,"payload":"hello"}
  {"index":"0:1","cycle":0,"seq":1,"length":2,"payload_hex":"ff00"}

Messages of a typed appender (queue.NewAppender[T]) are T's memory image.
--layout names T's fields in order, with Go's types, and prints each such
message as a JSON object of its fields (in "fields" with --json); the
padding Go puts between fields is applied, and a field named _ is skipped.
A message of another size is printed as without --layout (with
"layout_error" under --json). For

  type Trade struct {
      ID   uint64
      Qty  int32
      Side uint8
      _    [3]byte
  }

  offqueue dump --layout 'ID:uint64,Qty:int32,Side:uint8,_:[3]byte' DIR
  0:0	16	{"ID":1,"Qty":5,"Side":1}

--skip BYTES drops the first BYTES of every message before it is printed
(the length printed is what remains): 16 shows the payloads of a queue
that 'offrepl ingest' fills, without the frame that holds the engine's
sequence.

The format flags are --hex, --json, --layout and --skip.

Dump opens the queue read-only and changes nothing.`,
	examples: `  offqueue dump /var/queues/orders
  # ten messages, from the 101st of the queue's first day
  offqueue dump --from 0:100 -n 10 /var/queues/orders
  # the last five messages, as tail -n 5 prints the last lines
  offqueue dump --last 5 /var/queues/orders
  # the text payloads, with jq
  offqueue dump --json /var/queues/orders | jq -r .payload
  # typed messages (queue.NewAppender[Trade]) as JSON objects
  offqueue dump --layout 'ID:uint64,Qty:int32,Side:uint8,_:[3]byte' /q/trades`,
	run: runDump,
}

var followCommand = command{
	name:     "follow",
	synopsis: "[format flags] [--from start|end|INDEX | -n N] DIR",
	summary:  "print messages as they are appended, like tail -f",
	help: `Follow prints messages as dump does, one per line, and then waits for
more, printing each as it is appended, like tail -f, until interrupted. It
starts at the end (only new messages) unless --from says otherwise, or
-n N, which first prints the last N messages, as tail -n N -f does. It
sleeps while the queue is idle and wakes within microseconds of an append.

It opens the queue for writing when it may, so that appends by other
processes wake it (a read-only follower polls), but appends nothing.`,
	examples: `  offqueue follow /var/queues/orders
  # from the first message, as JSON lines
  offqueue follow --json --from start /var/queues/orders
  # the last ten messages, then every new one
  offqueue follow -n 10 /var/queues/orders`,
	run: runFollow,
}

// msgFormat says how dump and follow print a message.
type msgFormat struct {
	hex, json bool
	layout    *layout // --layout: decode typed messages
	skip      int     // --skip: bytes dropped from the start of each message
}

func (f *msgFormat) define(fs *flag.FlagSet) {
	fs.BoolVar(&f.hex, "hex", false, "print every payload in hexadecimal")
	fs.BoolVar(&f.json, "json", false, "print JSON lines, one object per message")
	fs.Func("layout", "decode typed messages (queue.NewAppender) of a struct laid out as `FIELDS`: NAME:TYPE,... in order, _ for padding; TYPE int8-64, uint8-64, float32, float64, bool, byte, [N]TYPE", func(s string) error {
		l, err := parseLayout(s)
		f.layout = l
		return err
	})
	cliargs.IntSizeVar(fs, &f.skip, "skip", 0, "drop the first `BYTES` of each message before printing it (16: the frame of a queue that 'offrepl ingest' writes)")
}

func runDump(c *cli, args []string) error {
	fs := c.flags()
	var f msgFormat
	f.define(fs)
	from := fs.String("from", "start", "start, end or an `INDEX` CYCLE:SEQ")
	last := cliargs.Count(fs, "last", 0, "start at the last `N` messages instead")
	count := cliargs.Count(fs, "n", 0, "print at most `COUNT` messages (0: all)")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *count < 0 {
		return c.usageError("-n must not be negative")
	}
	if *last < 0 {
		return c.usageError("--last must not be negative")
	}
	seek, err := c.startAt(fs, *from, "last", *last)
	if err != nil {
		return err
	}
	q, t, err := openTail(pos[0], true)
	if err != nil {
		return err
	}
	defer q.Close()
	if err := seek(t); err != nil {
		return err
	}
	for n := 0; *count == 0 || n < *count; n++ {
		idx, msg, err := t.Next()
		if err == queue.ErrNoMessage {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f.print(c.stdout, idx, msg); err != nil {
			return err
		}
	}
	return nil
}

func runFollow(c *cli, args []string) error {
	fs := c.flags()
	var f msgFormat
	f.define(fs)
	from := fs.String("from", "end", "start, end or an `INDEX` CYCLE:SEQ")
	last := cliargs.Count(fs, "n", 0, "first print the last `N` messages, as tail -n does")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *last < 0 {
		return c.usageError("-n must not be negative")
	}
	seek, err := c.startAt(fs, *from, "n", *last)
	if err != nil {
		return err
	}
	// Read-write when allowed: a read-only process cannot watch the
	// doorbell, and would poll instead.
	q, t, err := openTail(pos[0], false)
	if err != nil {
		return err
	}
	defer q.Close()
	if err := seek(t); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
			if err := f.print(c.stdout, idx, msg); err != nil {
				return err
			}
		}
		if err := c.stdout.Flush(); err != nil {
			return err
		}
	}
}

// formatIndex writes an index as CYCLE:SEQ.
func formatIndex(idx uint64) string {
	c, s := queue.SplitIndex(idx)
	return fmt.Sprintf("%d:%d", c, s)
}

// msgJSON is one message of dump --json.
type msgJSON struct {
	Index       string          `json:"index"`
	Cycle       uint32          `json:"cycle"`
	Seq         uint32          `json:"seq"`
	Length      int             `json:"length"`
	Fields      json.RawMessage `json:"fields,omitempty"`       // with --layout
	LayoutError string          `json:"layout_error,omitempty"` // with --layout, a message it does not fit
	Payload     *string         `json:"payload,omitempty"`
	PayloadHex  *string         `json:"payload_hex,omitempty"`
}

// print writes one message as "CYCLE:SEQ length payload", the payload as
// quoted text when it is printable UTF-8, else (or with --hex) in hex; or
// as a JSON object.
func (f *msgFormat) print(w io.Writer, idx uint64, msg []byte) error {
	msg = msg[min(f.skip, len(msg)):]
	var fields []byte
	var layoutErr error
	if f.layout != nil {
		fields, layoutErr = f.layout.decode(msg)
	}
	if f.json {
		c, s := queue.SplitIndex(idx)
		j := msgJSON{Index: formatIndex(idx), Cycle: c, Seq: s, Length: len(msg), Fields: fields}
		if fields != nil {
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			return enc.Encode(j)
		}
		if layoutErr != nil {
			j.LayoutError = layoutErr.Error()
		}
		p := string(msg)
		if f.hex || !utf8.Valid(msg) {
			p = hex.EncodeToString(msg)
			j.PayloadHex = &p
		} else {
			j.Payload = &p
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(j)
	}
	if fields != nil {
		_, err := fmt.Fprintf(w, "%s\t%d\t%s\n", formatIndex(idx), len(msg), fields)
		return err
	}
	var payload string
	if !f.hex && printable(msg) {
		payload = strconv.Quote(string(msg))
	} else {
		payload = hex.EncodeToString(msg)
	}
	_, err := fmt.Fprintf(w, "%s\t%d\t%s\n", formatIndex(idx), len(msg), payload)
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
func parseIndex(s string) (uint64, bool) {
	if c, q, ok := strings.Cut(s, ":"); ok {
		cv, err1 := strconv.ParseUint(c, 10, 32)
		qv, err2 := strconv.ParseUint(q, 10, 32)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return queue.Index(uint32(cv), uint32(qv)), true
	}
	v, err := strconv.ParseUint(s, 0, 64)
	return v, err == nil
}

// startAt returns what moves a tailer where --from, or the flag that asks
// for the last n messages, says: not both.
func (c *cli) startAt(fs *flag.FlagSet, from, lastFlag string, n int) (func(*queue.Tailer) error, error) {
	fromSet, lastSet := false, false
	fs.Visit(func(f *flag.Flag) {
		fromSet = fromSet || f.Name == "from"
		lastSet = lastSet || f.Name == lastFlag
	})
	if fromSet && lastSet {
		return nil, c.usageError("--from and -%s both say where to start: give one", lastFlag)
	}
	if lastSet {
		return func(t *queue.Tailer) error { return t.SeekLast(n) }, nil
	}
	return c.position(from)
}

// position checks --from and returns what moves a tailer there.
func (c *cli) position(from string) (func(*queue.Tailer) error, error) {
	switch from {
	case "start":
		return (*queue.Tailer).SeekStart, nil
	case "end":
		return (*queue.Tailer).SeekEnd, nil
	}
	idx, ok := parseIndex(from)
	if !ok {
		return nil, c.usageError("--from %q is not start, end or an index CYCLE:SEQ", from)
	}
	return func(t *queue.Tailer) error {
		if err := t.Seek(idx); err != nil {
			return fmt.Errorf("--from %s: %w", from, err)
		}
		return nil
	}, nil
}
