package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The dump format, written by dump and read by load: one entry per line,
// in one of three forms that load tells apart by the first byte.
//
//	"user1" "hello\x00"                     text: key and value as Go-quoted strings
//	7573657231 68656c6c6f00                 --hex: lower-case hexadecimal; an empty field is ""
//	{"key":"user1","value_hex":"68656c6c6f00"}  --json: one object per line
//
// In JSON lines a key or value that is UTF-8 text is a JSON string under
// "key" or "value"; any other (and every field with --hex) is hexadecimal
// under "key_hex" or "value_hex". Every form carries arbitrary bytes
// exactly, so dump | load copies a map exactly.
//
// A text or hex dump starts with a comment giving the map's layout, from
// which load creates the target file if it does not exist:
//
//	# offmap dump 1: entries=1000 avg-key=16 avg-value=8 max-key=256 max-value=256 segments=16
//
// Load skips empty lines and lines that start with '#'.
const dumpComment = "# offmap dump 1:"

// dumpWriter writes entries in the dump format.
type dumpWriter struct {
	w    *bufio.Writer
	hex  bool
	json bool
	buf  []byte
}

// header writes the layout comment (text and hex forms only).
func (d *dumpWriter) header(l layout) error {
	if d.json {
		return nil
	}
	_, err := fmt.Fprintf(d.w, "%s entries=%d avg-key=%d avg-value=%d max-key=%d max-value=%d segments=%d\n",
		dumpComment, l.entries, l.avgKey, l.avgValue, l.maxKey, l.maxValue, l.segments)
	return err
}

func (d *dumpWriter) write(key, value []byte) error {
	b := d.buf[:0]
	if d.json {
		b = append(b, '{')
		b = appendJSONField(b, "key", key, d.hex)
		b = append(b, ',')
		b = appendJSONField(b, "value", value, d.hex)
		b = append(b, '}', '\n')
	} else {
		b = appendTextField(b, key, d.hex)
		b = append(b, ' ')
		b = appendTextField(b, value, d.hex)
		b = append(b, '\n')
	}
	d.buf = b
	_, err := d.w.Write(b)
	return err
}

func appendTextField(b, f []byte, isHex bool) []byte {
	if isHex && len(f) > 0 {
		return hex.AppendEncode(b, f)
	}
	return strconv.AppendQuote(b, string(f))
}

func appendJSONField(b []byte, name string, f []byte, isHex bool) []byte {
	if isHex || !utf8.Valid(f) {
		b = append(b, `"`+name+`_hex":"`...)
		b = hex.AppendEncode(b, f)
		return append(b, '"')
	}
	b = append(b, `"`+name+`":"`...)
	for _, c := range f { // valid UTF-8: multi-byte sequences pass as they are
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20 || c == 0x7f:
			b = fmt.Appendf(b, `\u%04x`, c)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// dumpReader reads entries in the dump format.
type dumpReader struct {
	r         *bufio.Reader
	line      int
	buf       []byte
	layout    layout // from the layout comment
	hasLayout bool
	bytesRead int64
}

func newDumpReader(r io.Reader) *dumpReader {
	return &dumpReader{r: bufio.NewReaderSize(r, 256<<10)}
}

// next returns the next entry, or io.EOF after the last. The slices are
// valid until the next call.
func (d *dumpReader) next() (key, value []byte, err error) {
	for {
		line, err := d.readLine()
		if err != nil {
			return nil, nil, err
		}
		switch {
		case len(line) == 0:
			continue
		case line[0] == '#':
			if err := d.comment(string(line)); err != nil {
				return nil, nil, fmt.Errorf("line %d: %v", d.line, err)
			}
			continue
		case line[0] == '{':
			key, value, err = parseJSONLine(line)
		default:
			key, value, err = parseTextLine(string(line))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %v", d.line, err)
		}
		return key, value, nil
	}
}

// readLine returns the next line without its line end; lines may be
// longer than the reader's buffer.
func (d *dumpReader) readLine() ([]byte, error) {
	line, err := d.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		d.buf = append(d.buf[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = d.r.ReadSlice('\n')
			d.buf = append(d.buf, line...)
		}
		line = d.buf
	}
	d.bytesRead += int64(len(line))
	if err == io.EOF && len(line) > 0 {
		err = nil // a last line without a newline
	}
	if err != nil {
		return nil, err
	}
	d.line++
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// comment reads the layout from a layout comment; other comments are
// skipped.
func (d *dumpReader) comment(line string) error {
	rest, ok := strings.CutPrefix(line, dumpComment)
	if !ok || d.hasLayout {
		return nil
	}
	l := layout{}
	for _, f := range strings.Fields(rest) {
		name, val, _ := strings.Cut(f, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("bad layout field %q", f)
		}
		switch name {
		case "entries":
			l.entries = int(n)
		case "avg-key":
			l.avgKey = int(n)
		case "avg-value":
			l.avgValue = int(n)
		case "max-key":
			l.maxKey = int(n)
		case "max-value":
			l.maxValue = int(n)
		case "segments":
			l.segments = int(n)
		}
	}
	d.layout, d.hasLayout = l, true
	return nil
}

// parseTextLine parses `KEY VALUE`, each field quoted or hexadecimal.
func parseTextLine(line string) (key, value []byte, err error) {
	key, rest, err := parseTextField(line, "key")
	if err != nil {
		return nil, nil, err
	}
	if rest == "" || rest[0] != ' ' {
		return nil, nil, errors.New("want KEY VALUE separated by one space")
	}
	value, rest, err = parseTextField(rest[1:], "value")
	if err != nil {
		return nil, nil, err
	}
	if rest != "" {
		return nil, nil, fmt.Errorf("unexpected %q after the value", truncate(rest))
	}
	return key, value, nil
}

func parseTextField(s, what string) (field []byte, rest string, err error) {
	if s == "" || s[0] == ' ' {
		return nil, "", fmt.Errorf("missing %s", what)
	}
	if s[0] == '"' {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, "", fmt.Errorf("%s: bad quoted string %s", what, truncate(s))
		}
		u, err := strconv.Unquote(q)
		if err != nil {
			return nil, "", fmt.Errorf("%s: bad quoted string %s", what, truncate(q))
		}
		return []byte(u), s[len(q):], nil
	}
	end := strings.IndexByte(s, ' ')
	if end < 0 {
		end = len(s)
	}
	field, err = hex.DecodeString(s[:end])
	if err != nil {
		return nil, "", fmt.Errorf("%s: %q is neither a quoted string nor hexadecimal", what, truncate(s[:end]))
	}
	return field, s[end:], nil
}

// jsonLine is one entry in JSON form.
type jsonLine struct {
	Key      *string `json:"key"`
	KeyHex   *string `json:"key_hex"`
	Value    *string `json:"value"`
	ValueHex *string `json:"value_hex"`
}

func parseJSONLine(line []byte) (key, value []byte, err error) {
	var j jsonLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, nil, fmt.Errorf("bad JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("bad JSON: more than one object on the line")
	}
	if key, err = jsonField(j.Key, j.KeyHex, "key"); err != nil {
		return nil, nil, err
	}
	if value, err = jsonField(j.Value, j.ValueHex, "value"); err != nil {
		return nil, nil, err
	}
	return key, value, nil
}

func jsonField(text, hexText *string, name string) ([]byte, error) {
	switch {
	case text != nil && hexText != nil:
		return nil, fmt.Errorf("both %q and %q", name, name+"_hex")
	case text != nil:
		return []byte(*text), nil
	case hexText != nil:
		b, err := hex.DecodeString(*hexText)
		if err != nil {
			return nil, fmt.Errorf("%s_hex: %q is not hexadecimal", name, truncate(*hexText))
		}
		return b, nil
	}
	return nil, fmt.Errorf("no %q or %q", name, name+"_hex")
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
