// Package cliargs holds what the commands (offmap, offqueue, edabench,
// offrepl) share in reading a command line, reading sizes and counts,
// printing sizes and printing their help, so that they agree
// (docs/CLI.md).
package cliargs

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Split separates args into flags (with their values) and positional
// arguments, so that flags may come before, between or after the
// arguments; "--" ends them. An argument that looks like a negative
// number ("-5") is positional.
func Split(fs *flag.FlagSet, args []string) (flags, pos []string) {
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
	return flags, pos
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// HelpWidth is the width help text keeps within.
const HelpWidth = 80

// WriteFlags prints the "flags:" part of a command's --help, if it has
// flags: one-letter flags with one dash, others with two, each
// description wrapped at word boundaries within HelpWidth columns.
//
// A flag that Alias defined is shown on its long form's line:
// "-o, --out FILE".
func WriteFlags(w io.Writer, fs *flag.FlagSet) {
	short := map[string]string{} // long name: its alias
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, aliasUsage); ok {
			short[long] = f.Name
		}
	})
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, aliasUsage) {
			return // shown with its long form
		}
		if first {
			fmt.Fprint(w, "\nflags:\n")
			first = false
		}
		arg, usage := flag.UnquoteUsage(f)
		name := FlagName(f.Name)
		if alias, ok := short[f.Name]; ok {
			name = FlagName(alias) + ", " + name
		}
		if arg != "" {
			name += " " + arg
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		writeFlag(w, name, usage)
	})
}

// aliasUsage marks a flag that Alias defined.
const aliasUsage = "\x00alias of "

// Alias defines the one-letter flag short as another name of the flag
// long, which fs must already define: "-o FILE" is "--out FILE".
func Alias(fs *flag.FlagSet, short, long string) {
	fs.Var(fs.Lookup(long).Value, short, aliasUsage+long)
}

func writeFlag(w io.Writer, name, usage string) {
	const indent = 2 + 20 + 1
	line := fmt.Sprintf("  %-20s", name)
	if len(line) > indent-1 {
		fmt.Fprintln(w, line)
		line = strings.Repeat(" ", indent-1)
	}
	n := 0
	for _, word := range strings.Fields(usage) {
		if n > 0 && len(line)+1+len(word) > HelpWidth {
			fmt.Fprintln(w, line)
			line, n = strings.Repeat(" ", indent-1), 0
		}
		line += " " + word
		n++
	}
	fmt.Fprintln(w, line)
}

// The exit statuses of the tools (docs/CLI.md).
const (
	ExitOK       = 0
	ExitNegative = 1 // a key is absent, problems were found
	ExitError    = 2 // wrong arguments, a missing or foreign file, failed I/O
)

// ExitErr carries an exit status other than ExitError.
type ExitErr struct {
	Code   int
	Err    error
	Silent bool // the command already reported it
}

func (e *ExitErr) Error() string { return e.Err.Error() }
func (e *ExitErr) Unwrap() error { return e.Err }

// Negative makes err end the command with ExitNegative.
func Negative(err error) error { return &ExitErr{Code: ExitNegative, Err: err} }

// Status returns the exit status err calls for, and whether err is still
// to be printed.
func Status(err error) (code int, print bool) {
	var ee *ExitErr
	if errors.As(err, &ee) {
		return ee.Code, !ee.Silent
	}
	return ExitError, true
}
