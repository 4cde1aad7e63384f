// Command offqueue inspects and feeds an offmap queue: dump its messages,
// follow it like tail -f, print its statistics, verify it, append lines
// from stdin.
//
//	offqueue dump [--hex] [--json] [--from INDEX] [-n COUNT] DIR
//	offqueue follow [--hex] [--json] [--from start|end|INDEX] DIR
//	offqueue stats [--json] DIR
//	offqueue verify DIR
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
	"strings"
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
var commands = []*command{&dumpCommand, &followCommand, &statsCommand, &verifyCommand, &appendCommand}

// Exit statuses, as offmap's.
const (
	exitOK       = 0
	exitNegative = 1 // verify found problems
	exitError    = 2 // wrong arguments, missing or foreign queue, failed I/O
)

// cli is what a command runs with.
type cli struct {
	cmd    *command
	stdin  io.Reader
	stdout *bufio.Writer
	stderr io.Writer
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
	err := cmd.run(c, args[1:])
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	return c.exit(err)
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
	code := exitError
	var ee *exitErr
	if errors.As(err, &ee) {
		code = ee.code
		if ee.silent {
			return code
		}
	}
	fmt.Fprintf(c.stderr, "offqueue: %s: %s\n", c.cmd.name, message(err))
	return code
}

// exitErr carries an exit status other than exitError.
type exitErr struct {
	code   int
	err    error
	silent bool // the command already reported it
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

// negative makes err end the command with exit status 1.
func negative(err error) error { return &exitErr{code: exitNegative, err: err} }

// errProblems ends a verify that printed the problems it found.
var errProblems = &exitErr{code: exitNegative, silent: true, err: errors.New("problems found")}

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
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
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

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// helpWidth is the width help text keeps within.
const helpWidth = 80

// writeHelp prints a command's --help: usage, description, flags, examples.
func writeHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: offqueue %s %s\n\n%s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nflags:\n")
			first = false
		}
		arg, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if len(f.Name) == 1 {
			name = "-" + f.Name
		}
		if arg != "" {
			name += " " + arg
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		writeFlag(w, name, usage)
	})
	fmt.Fprintf(w, "\nexamples:\n%s\n", strings.TrimRight(cmd.examples, "\n"))
}

// writeFlag prints one flag of a --help, its description wrapped at word
// boundaries within helpWidth columns.
func writeFlag(w io.Writer, name, usage string) {
	const indent = 2 + 20 + 1
	line := fmt.Sprintf("  %-20s", name)
	if len(line) > indent-1 {
		fmt.Fprintln(w, line)
		line = strings.Repeat(" ", indent-1)
	}
	n := 0
	for _, word := range strings.Fields(usage) {
		if n > 0 && len(line)+1+len(word) > helpWidth {
			fmt.Fprintln(w, line)
			line, n = strings.Repeat(" ", indent-1), 0
		}
		line += " " + word
		n++
	}
	fmt.Fprintln(w, line)
}
