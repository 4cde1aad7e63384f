package cliargs

import (
	"flag"
	"fmt"
	"strings"
)

// FlagName is a flag as the tools' help and errors write it: two dashes
// for a long flag (--json), one for a one-letter flag (-n).
func FlagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// Parse parses args into fs and returns the positional arguments. Flags
// may come before, between or after the arguments (Split); a flag takes
// one or two dashes, and --flag=value. -h, -help and --help return
// flag.ErrHelp when fs defines no such flag. An error names a flag as
// FlagName writes it (unknown flag --nosuch), whichever dashes the user
// typed.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	flags, pos := Split(fs, args)
	for i := 0; i < len(flags); i++ {
		a := flags[i]
		name := strings.TrimPrefix(a[1:], "-")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil, fmt.Errorf("bad flag syntax: %s", a)
		}
		value, hasValue := "", false
		if j := strings.IndexByte(name, '='); j >= 0 {
			name, value, hasValue = name[:j], name[j+1:], true
		}
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				return nil, flag.ErrHelp
			}
			return nil, fmt.Errorf("unknown flag %s", FlagName(name))
		}
		switch {
		case isBoolFlag(f):
			if !hasValue {
				value = "true"
			}
		case hasValue:
		case i+1 < len(flags):
			i++
			value = flags[i]
		default:
			return nil, fmt.Errorf("flag %s needs a value", FlagName(name))
		}
		if err := fs.Set(name, value); err != nil {
			return nil, fmt.Errorf("invalid value %q for %s: %v", value, FlagName(name), err)
		}
	}
	return pos, nil
}
