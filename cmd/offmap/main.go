// Command offmap creates, inspects, verifies, repairs, compacts and
// upgrades offmap map files, so that an operator can look inside a map
// without writing Go.
//
//	offmap create FILE --entries N --avg-key B --avg-value B
//	offmap stat [--json] [--segments] FILE
//	offmap get [--hex|--int64] FILE KEY
//	offmap put [--hex] FILE KEY VALUE
//	offmap del [--hex] FILE KEY
//	offmap incr [--hex] FILE KEY [DELTA]
//	offmap dump [--hex] [--json] FILE
//	offmap load [--entries N ...] FILE [INPUT]
//	offmap verify FILE
//	offmap recover [--timeout D] FILE
//	offmap copy [--entries N ...] SRC DST
//	offmap backup FILE DEST
//	offmap upgrade FILE
//
// Exit status: 0 on success; 1 for a negative answer (get or del of an
// absent key, verify finding problems, a damaged file included); 2 for an
// error (wrong arguments, a missing, foreign or unreadable file, a failed
// operation). docs/CLI.md has more.
package main

import (
	"bufio"
	"errors"
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

// commands lists the verbs in the order "offmap help" shows them.
var commands = []*command{
	&createCommand, &statCommand, &getCommand, &putCommand, &delCommand, &incrCommand,
	&dumpCommand, &loadCommand, &verifyCommand, &recoverCommand, &copyCommand, &backupCommand, &upgradeCommand, &sweepCommand,
}

// Exit statuses: the same for both tools (internal/cliargs).
const (
	exitOK       = cliargs.ExitOK
	exitNegative = cliargs.ExitNegative
	exitError    = cliargs.ExitError
)

// cli is what a command runs with: its streams and whether stderr is a
// terminal that may show progress bars.
type cli struct {
	cmd       *command
	stdin     io.Reader
	stdout    *bufio.Writer
	stderr    io.Writer
	stderrTTY bool // stderr is a terminal: long operations show progress
	stdoutTTY bool
}

func main() {
	// A fault reading the mapped file (another process truncated it) is a
	// panic in this goroutine rather than a crash; run turns it into an
	// error line.
	debug.SetPanicOnFault(true)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	out := bufio.NewWriterSize(stdout, 64<<10)
	defer out.Flush()
	if len(args) == 0 {
		fmt.Fprintln(stderr, "offmap: no command given (see 'offmap help')")
		return exitError
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			writeOverview(out)
			return exitOK
		}
		args = []string{args[1], "--help"} // "offmap help get" is "offmap get --help"
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "offmap: unknown command %q (see 'offmap help')\n", args[0])
		return exitError
	}
	c := &cli{
		cmd:       cmd,
		stdin:     stdin,
		stdout:    out,
		stderr:    stderr,
		stderrTTY: isTerminal(stderr),
		stdoutTTY: isTerminal(stdout),
	}
	defer func() {
		if r := recover(); r != nil {
			out.Flush()
			fmt.Fprintf(stderr, "offmap: %s: %s\n", cmd.name, panicMessage(r))
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
		return fmt.Sprintf("memory fault at %#x reading the map: was the file truncated while in use?", f.Addr())
	}
	return "unexpected error: " + oneLine(fmt.Sprint(r))
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
		fmt.Fprintf(c.stderr, "offmap: %s: %s\n", c.cmd.name, message(err))
	}
	return code
}

// negative makes err end the command with exit status 1.
func negative(err error) error { return cliargs.Negative(err) }

// usageError is an error in the command line.
func (c *cli) usageError(format string, args ...any) error {
	return fmt.Errorf("%s (see 'offmap %s --help')", fmt.Sprintf(format, args...), c.cmd.name)
}

// errHelpShown ends a command whose --help was printed.
var errHelpShown = errors.New("help shown")

// message is err as one line, without the "offmap: " prefixes that the
// library's errors carry, also when wrapped (the command line adds its own).
func message(err error) string {
	return oneLine(strings.ReplaceAll(err.Error(), "offmap: ", ""))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func writeOverview(w io.Writer) {
	fmt.Fprint(w, `offmap creates, inspects, verifies, repairs, compacts and upgrades offmap
map files.

usage: offmap COMMAND [flags] FILE [args]

commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprint(w, `
'offmap COMMAND --help' describes a command, with examples. Flags may come
before or after the arguments; '--' ends them (for a key that starts with
'-'). Exit status: 0 success; 1 key absent (get, del) or problems found
(verify); 2 usage, open or I/O error. docs/CLI.md has the conventions
offmap shares with offqueue.
`)
}
