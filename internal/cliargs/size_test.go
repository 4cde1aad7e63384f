package cliargs

import (
	"flag"
	"math"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string // a part of the error; "" for none
	}{
		{"0", 0, ""},
		{"4096", 4096, ""},
		{"1_048_576", 1 << 20, ""},
		{"274877906944", 256 << 30, ""},
		{"256GiB", 256 << 30, ""},
		{"256G", 256 << 30, ""},
		{"256 GiB", 256 << 30, ""},
		{"256gib", 256 << 30, ""},
		{" 64KiB ", 64 << 10, ""},
		{"64K", 64 << 10, ""},
		{"64k", 64 << 10, ""},
		{"64kB", 64_000, ""},
		{"64KB", 64_000, ""},
		{"10MB", 10_000_000, ""},
		{"10MiB", 10 << 20, ""},
		{"2TB", 2e12, ""},
		{"2T", 2 << 40, ""},
		{"1.5GiB", 3 << 29, ""},
		{"1.5 G", 3 << 29, ""},
		{"0.5KiB", 512, ""},
		{"1.1KiB", 1126, ""}, // 1126.4: the fraction of a byte dropped
		{"512B", 512, ""},
		{"1e6", 1_000_000, ""},
		{"1.5e3", 1500, ""},
		{"1e3KiB", 1000 << 10, ""},
		{"0x10000", 1 << 16, ""},
		{"7EiB", 7 << 60, ""},
		{"9223372036854775807", math.MaxInt64, ""},
		{"9223372036854775808", 0, "too large"},
		{"8EiB", 0, "too large"},
		{"16E", 0, "too large"},
		{"1e19", 0, "too large"},
		{"1e999999999", 0, "exponent out of range"},
		{"-1", 0, "negative"},
		{"-1GiB", 0, "negative"},
		{"1.5", 0, "not a whole number of bytes"},
		{"1e-3", 0, "not a whole number of bytes"},
		{"", 0, "not a number"},
		{"GiB", 0, "not a number"},
		{"abc", 0, "unknown unit"},
		{"12XB", 0, "unknown unit"},
		{"12 parsecs", 0, "unknown unit"},
		{"1..5G", 0, "not a number"},
		{"1.G", 0, "not a number"},
		{".5G", 0, "not a number"},
		{"1__000", 0, "not a number"},
		{"_1000", 0, "not a number"},
		{"1000_", 0, "not a number"},
		{"1,000", 0, "not a number"},
		{"1/2", 0, "not a number"},
		{"1e", 1 << 60, ""}, // e alone is the unit E
		{"0x", 0, "unknown unit"},
		{"0xZZ", 0, "not a number"},
		{"1 2", 0, "not a number"},
	} {
		got, err := ParseSize(c.in)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("ParseSize(%q): %v", c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseSize(%q) = %d, %v; want an error with %q", c.in, got, err, c.err)
		case c.err == "" && got != c.want:
			t.Errorf("ParseSize(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestParseCount(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"1000000", 1_000_000, ""},
		{"1_000_000", 1_000_000, ""},
		{"1e6", 1_000_000, ""},
		{"1E6", 1_000_000, ""},
		{"2.5e3", 2500, ""},
		{"1e+3", 1000, ""},
		{"010", 10, ""}, // decimal, not octal
		{"0x20", 32, ""},
		{"9.223372036854775807e18", math.MaxInt64, ""},
		{"1e19", 0, "too large"},
		{"-5", 0, "negative"},
		{"1.5", 0, "not a whole number"},
		{"1e-1", 0, "not a whole number"},
		{"1M", 0, "not a number"},
		{"1k", 0, "not a number"},
		{"many", 0, "not a number"},
		{"", 0, "not a number"},
		{"1e", 0, "not a number"},
	} {
		got, err := ParseCount(c.in)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("ParseCount(%q): %v", c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseCount(%q) = %d, %v; want an error with %q", c.in, got, err, c.err)
		case c.err == "" && got != c.want:
			t.Errorf("ParseCount(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 384 << 10: "384.0 KiB",
		64 << 30: "64.0 GiB", 256 << 30: "256.0 GiB", 3 << 40: "3.0 TiB", math.MaxInt64: "8.0 EiB",
	} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if n == math.MaxInt64 {
			continue // 8.0 EiB is one past the largest size
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

// TestSizeFlags checks the flags through Parse: their values, their
// default as help shows it, and the error naming the flag.
func TestSizeFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var max int64
	var avg, entries int
	SizeVar(fs, &max, "max-file-size", 64<<30, "at most `BYTES`")
	IntSizeVar(fs, &avg, "avg-key", 32, "`BYTES` per key")
	CountVar(fs, &entries, "entries", 0, "`N` entries")
	if _, err := Parse(fs, []string{"--max-file-size", "256GiB", "--avg-key=1KiB", "-entries", "1e6"}); err != nil {
		t.Fatal(err)
	}
	if max != 256<<30 || avg != 1024 || entries != 1_000_000 {
		t.Fatalf("max %d, avg %d, entries %d", max, avg, entries)
	}
	if d := fs.Lookup("max-file-size").DefValue; d != "64GiB" {
		t.Errorf("default shown as %q, want 64GiB", d)
	}
	if d := fs.Lookup("avg-key").DefValue; d != "32" {
		t.Errorf("default shown as %q, want 32", d)
	}
	var help strings.Builder
	WriteFlags(&help, fs)
	if !strings.Contains(help.String(), "(default 64GiB)") || !strings.Contains(help.String(), "64K = 64KiB = 65536, 64kB = 64000") ||
		!strings.Contains(help.String(), "1_000_000") || strings.Contains(help.String(), "(default 0)") {
		t.Errorf("help:\n%s", help.String())
	}
	_, err := Parse(fs, []string{"-max-file-size", "256X"})
	if want := `invalid value "256X" for --max-file-size: unknown unit "X"`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want it to start with %s", err, want)
	}
}
