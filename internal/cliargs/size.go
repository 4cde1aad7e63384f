package cliargs

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// The units ParseSize accepts, case aside: KiB, MiB, GiB, TiB, PiB and EiB
// (and K, M, G, T, P, E alone) are powers of 1024; kB, MB, GB, TB, PB and
// EB powers of 1000, as GNU dd and df read them. B is a byte.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pib": 1 << 50, "pb": 1e15,
	"e": 1 << 60, "eib": 1 << 60, "eb": 1e18,
}

// SizeHelp ends the help of a flag that ParseSize reads.
const SizeHelp = "; units: 64K = 64KiB = 65536, 64kB = 64000, and M, G, T alike"

// CountHelp ends the help of a flag that ParseCount reads.
const CountHelp = "; 1e6 and 1_000_000 are accepted"

// ParseSize reads a size in bytes: a number (digits, '_' between digits
// allowed, an optional fraction and exponent: 4096, 1_048_576, 1.5, 1e6,
// or 0x10000) and an optional unit, with or without a space between:
// 64KiB, 1.5 GiB, 256G, 10MB (sizeUnits). With a unit, a fraction of a
// byte is dropped (1.1KiB is 1126 bytes); without one, the number must be
// whole. Negative sizes and sizes over math.MaxInt64 are refused.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && isLetter(t[i-1]) && !isHexPrefixed(t) {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(t[i:])
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (want KiB, MiB, GiB, TiB, K, M, G, T, kB, MB, GB or TB)", t[i:])
	}
	r, err := parseNumber(num)
	if err != nil {
		return 0, err
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if unit == "" && !r.IsInt() {
		return 0, errors.New("not a whole number of bytes")
	}
	return toInt64(r)
}

// ParseCount reads a count: a whole number, with '_' between digits and
// an exponent allowed (1000000, 1_000_000, 1e6, 2.5e3), or 0x hex.
// Negative counts and counts over math.MaxInt64 are refused.
func ParseCount(s string) (int64, error) {
	r, err := parseNumber(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	if !r.IsInt() {
		return 0, errors.New("not a whole number")
	}
	return toInt64(r)
}

func toInt64(r *big.Rat) (int64, error) {
	if r.Sign() < 0 {
		return 0, errors.New("negative")
	}
	n := new(big.Int).Quo(r.Num(), r.Denom()) // rounds toward zero
	if !n.IsInt64() {
		return 0, fmt.Errorf("too large (at most %d)", int64(math.MaxInt64))
	}
	return n.Int64(), nil
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func isHexPrefixed(s string) bool {
	return len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

var errNotNumber = errors.New("not a number")

// parseNumber reads [-]DIGITS[.DIGITS][e[+-]DIGITS], '_' allowed between
// digits, or a 0x hexadecimal integer, exactly.
func parseNumber(s string) (*big.Rat, error) {
	if isHexPrefixed(s) {
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return nil, errNotNumber
		}
		return new(big.Rat).SetInt64(n), nil
	}
	var clean strings.Builder
	digits := func(i int) (int, error) { // the digits from s[i], '_' between them
		start := i
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
			if s[i] == '_' && (i == start || i+1 >= len(s) || s[i+1] < '0' || s[i+1] > '9') {
				return 0, errNotNumber
			}
			if s[i] != '_' {
				clean.WriteByte(s[i])
			}
			i++
		}
		if i == start {
			return 0, errNotNumber
		}
		return i, nil
	}
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		clean.WriteByte(s[i])
		i++
	}
	i, err := digits(i)
	if err != nil {
		return nil, err
	}
	if i < len(s) && s[i] == '.' {
		clean.WriteByte('.')
		if i, err = digits(i + 1); err != nil {
			return nil, err
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		clean.WriteByte('e')
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			clean.WriteByte(s[i])
			i++
		}
		start := clean.Len()
		if i, err = digits(i); err != nil {
			return nil, err
		}
		if clean.Len()-start > 3 { // 1e999 is already past any size
			return nil, errors.New("exponent out of range")
		}
	}
	if i != len(s) {
		return nil, errNotNumber
	}
	r, ok := new(big.Rat).SetString(clean.String())
	if !ok {
		return nil, errNotNumber
	}
	return r, nil
}

// FormatSize writes n bytes with a binary unit, as every tool prints a
// size: 512 B, 1.5 KiB, 64.0 GiB. ParseSize reads it back (to within the
// rounding of its one decimal).
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// exactSize writes n as ParseSize reads it, with the largest binary unit
// that divides it: 65536 is 64KiB, 1000 stays 1000.
func exactSize(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u := ""
	for i := 0; n != 0 && n%1024 == 0 && i < len(units); i++ {
		n /= 1024
		u = units[i]
	}
	return strconv.FormatInt(n, 10) + u
}

// intValue is an int or int64 flag read by ParseSize or ParseCount.
type intValue struct {
	p64  *int64
	p    *int
	size bool // ParseSize, not ParseCount
}

func (v *intValue) get() int64 {
	if v.p64 != nil {
		return *v.p64
	}
	if v.p != nil {
		return int64(*v.p)
	}
	return 0
}

// Get returns the value as an int64 (flag.Getter).
func (v *intValue) Get() any { return v.get() }

func (v *intValue) String() string {
	if v == nil || (v.p == nil && v.p64 == nil) {
		return "0"
	}
	if v.size {
		return exactSize(v.get())
	}
	return strconv.FormatInt(v.get(), 10)
}

func (v *intValue) Set(s string) error {
	parse := ParseCount
	if v.size {
		parse = ParseSize
	}
	n, err := parse(s)
	if err != nil {
		return err
	}
	if v.p64 != nil {
		*v.p64 = n
		return nil
	}
	if int64(int(n)) != n {
		return errors.New("too large")
	}
	*v.p = int(n)
	return nil
}

// SizeVar defines an int64 flag in bytes that ParseSize reads; its help
// ends with SizeHelp.
func SizeVar(fs *flag.FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var(&intValue{p64: p, size: true}, name, usage+SizeHelp)
}

// IntSizeVar is SizeVar for an int.
func IntSizeVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var(&intValue{p: p, size: true}, name, usage+SizeHelp)
}

// CountVar defines an int flag that ParseCount reads; its help ends with
// CountHelp.
func CountVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var(&intValue{p: p}, name, usage+CountHelp)
}

// Count is CountVar returning the flag's variable.
func Count(fs *flag.FlagSet, name string, value int, usage string) *int {
	p := new(int)
	CountVar(fs, p, name, value, usage)
	return p
}
