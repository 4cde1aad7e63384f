// Command offqueue inspects and feeds an offmap queue: dump its messages,
// follow it like tail -f, print its statistics, verify it, append lines
// from stdin.
//
//	offqueue dump [--hex] [--json] [--from INDEX] [-n COUNT] DIR
//	offqueue follow [--hex] [--json] [--from start|end|INDEX] DIR
//	offqueue stats [--json] [--watch [--interval D] [--count N]] DIR
//	offqueue verify DIR
//	offqueue backup DIR DEST
//	offqueue append DIR < lines
//
// Exit status: 0 on success; 1 when verify finds problems; 2 for an error
// (wrong arguments, a missing directory or one that is not a queue, a
// failed read or write). docs/CLI.md has more.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/offmap/offmap/internal/cliargs"
)

// command is one verb: its help and the function that runs it.
type command struct {
	name     string
	synopsis string // the arguments after the name
	summary  string // one line, for the list of commands
	help     string // what it does
	examples string // one per line, each with a comment line above it
	run      func(c *cli, args []string) error
}

// commands lists the verbs in the order "offqueue help" shows them.
var commands = []*command{&dumpCommand, &followCommand, &statsCommand, &verifyCommand, &appendCommand, &backupCommand}

// Exit statuses: the same for both tools (internal/cliargs).
const (
	exitOK       = cliargs.ExitOK
	exitNegative = cliargs.ExitNegative
	exitError    = cliargs.ExitError
)

// cli is what a command runs with.
type cli struct {
	cmd    *command
	stdin  io.Reader
	stdout *bufio.Writer
	stderr io.Writer
}

func main() {
	// A fault reading a mapped file (another process truncated it while
	// this one read it) is a panic in this goroutine rather than a crash;
	// run turns it into an error line. The library reports a truncated
	// file as ErrTruncated where it checks the file's size; between those
	// checks, reading a page the file lost faults.
	debug.SetPanicOnFault(true)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	out := bufio.NewWriterSize(stdout, 64<<10)
	defer out.Flush()
	if len(args) == 0 {
		fmt.Fprintln(stderr, "offqueue: no command given (see 'offqueue help')")
		return exitError
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			writeOverview(out)
			return exitOK
		}
		args = []string{args[1], "--help"} // "offqueue help dump" is "offqueue dump --help"
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "offqueue: unknown command %q (see 'offqueue help')\n", args[0])
		return exitError
	}
	c := &cli{cmd: cmd, stdin: stdin, stdout: out, stderr: stderr}
	defer func() {
		if r := recover(); r != nil {
			out.Flush()
			fmt.Fprintf(stderr, "offqueue: %s: %s\n", cmd.name, panicMessage(r))
			code = exitError
		}
	}()
	err := cmd.run(c, args[1:])
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	return c.exit(err)
}

// panicMessage describes a panic in one line.
func panicMessage(r any) string {
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		// SetPanicOnFault: the mapping lost its pages.
		return fmt.Sprintf("memory fault at %#x reading the queue: was a cycle file truncated while in use?", f.Addr())
	}
	return "unexpected error: " + message(fmt.Errorf("%v", r))
}

func lookup(name string) *command {
	for _, cmd := range commands {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
}

// exit prints err, if any, as one line and returns the exit status.
func (c *cli) exit(err error) int {
	if err == nil || errors.Is(err, errHelpShown) {
		return exitOK
	}
	code, print := cliargs.Status(err)
	if print {
		fmt.Fprintf(c.stderr, "offqueue: %s: %s\n", c.cmd.name, message(err))
	}
	return code
}

// negative makes err end the command with exit status 1.
func negative(err error) error { return cliargs.Negative(err) }

// errProblems ends a verify that printed the problems it found.
var errProblems = &cliargs.ExitErr{Code: exitNegative, Silent: true, Err: errors.New("problems found")}

// errHelpShown ends a command whose --help was printed.
var errHelpShown = errors.New("help shown")

// usageError is an error in the command line.
func (c *cli) usageError(format string, args ...any) error {
	return fmt.Errorf("%s (see 'offqueue %s --help')", fmt.Sprintf(format, args...), c.cmd.name)
}

// message is err as one line, without the "queue: " prefixes that the
// library's errors carry, also when wrapped (the command line adds its
// own). Only a prefix counts: at the start, or after ": ".
func message(err error) string {
	s := strings.TrimPrefix(err.Error(), "queue: ")
	s = strings.ReplaceAll(s, ": queue: ", ": ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func writeOverview(w io.Writer) {
	fmt.Fprint(w, `offqueue dumps, follows, inspects, verifies and appends to offmap queues.

usage: offqueue COMMAND [flags] DIR

commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-7s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprint(w, `
'offqueue COMMAND --help' describes a command, with examples. Flags may come
before or after the arguments; '--' ends them.
Exit status: 0 success; 1 problems found (verify); 2 usage, open or I/O
error. docs/CLI.md has the conventions offqueue shares with offmap.
`)
}

// flags returns an empty flag set for the running command; parse fills it.
func (c *cli) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(c.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors as one line
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs and returns the positional arguments, of which
// there must be between min and max. Flags may come before, between or
// after the arguments; "--" ends them. An argument that looks like a
// negative number ("-5") is positional.
func (c *cli) parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	pos, err := cliargs.Parse(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeHelp(c.stdout, c.cmd, fs)
			return nil, errHelpShown
		}
		return nil, c.usageError("%v", err)
	}
	if len(pos) < min || len(pos) > max {
		return nil, c.usageError("wrong number of arguments; usage: offqueue %s %s", c.cmd.name, c.cmd.synopsis)
	}
	return pos, nil
}

// writeHelp prints a command's --help: usage, description, flags, examples.
func writeHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: offqueue %s %s\n\n%s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
	cliargs.WriteFlags(w, fs)
	fmt.Fprintf(w, "\nexamples:\n%s\n", strings.TrimRight(cmd.examples, "\n"))
}
