package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/offmap/offmap/internal/cliargs"
	"golang.org/x/term"
)

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
		return nil, c.usageError("wrong number of arguments; usage: offmap %s %s", c.cmd.name, c.cmd.synopsis)
	}
	return pos, nil
}

// writeHelp prints a command's --help: usage, description, flags, examples.
func writeHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: offmap %s %s\n\n%s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
	cliargs.WriteFlags(w, fs)
	fmt.Fprintf(w, "\nexamples:\n%s\n", strings.TrimRight(cmd.examples, "\n"))
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// decodeArg turns a key or value given on the command line into bytes:
// the text as it is, or hexadecimal digits with --hex.
func decodeArg(s string, isHex bool, what string) ([]byte, error) {
	if !isHex {
		return []byte(s), nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not hexadecimal: %v", what, s, err)
	}
	return b, nil
}

// encodeOut is decodeArg's inverse, for output.
func encodeOut(b []byte, isHex bool) string {
	if isHex {
		return hex.EncodeToString(b)
	}
	return string(b)
}

// hexFlag defines the --hex flag shared by the commands that take keys.
func hexFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("hex", false, "keys and values are given and printed in hexadecimal")
}
