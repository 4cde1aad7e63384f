package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

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
		return nil, c.usageError("wrong number of arguments; usage: offmap %s %s", c.cmd.name, c.cmd.synopsis)
	}
	return pos, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// writeHelp prints a command's --help: usage, description, flags, examples.
func writeHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: offmap %s %s\n\n%s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nflags:\n")
			first = false
		}
		arg, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
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

// helpWidth is the width help text keeps within.
const helpWidth = 80

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
