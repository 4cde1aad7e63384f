package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A layout decodes messages that a typed appender (queue.NewAppender)
// wrote: the memory image of a fixed-layout Go struct, little-endian, with
// Go's alignment and padding. It is given on the command line as the
// struct's fields, in order, each NAME:TYPE; a field named _ is padding.
// TYPE is int8 to int64, uint8 to uint64, float32, float64, bool, or
// [N]TYPE; [N]byte prints as text when it is printable (trailing zero
// bytes dropped), else as hexadecimal.
type layout struct {
	fields []field
	size   int
}

type field struct {
	name string
	kind string // a scalar type name, or "" for an array
	n    int    // array length
	elem *field // array element
	size int
	off  int
}

var scalarSizes = map[string]int{
	"int8": 1, "int16": 2, "int32": 4, "int64": 8,
	"uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "byte": 1,
	"float32": 4, "float64": 8, "bool": 1,
}

// parseLayout parses "name:type,name:type,...".
func parseLayout(spec string) (*layout, error) {
	l := &layout{}
	maxAlign := 1
	for _, part := range strings.Split(spec, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("layout field %q is not NAME:TYPE", part)
		}
		f, err := parseType(typ)
		if err != nil {
			return nil, fmt.Errorf("layout field %s: %v", name, err)
		}
		f.name = name
		a := f.align()
		l.size = (l.size + a - 1) / a * a
		f.off = l.size
		l.size += f.size
		maxAlign = max(maxAlign, a)
		l.fields = append(l.fields, *f)
	}
	l.size = (l.size + maxAlign - 1) / maxAlign * maxAlign
	return l, nil
}

func parseType(typ string) (*field, error) {
	if n, ok := scalarSizes[typ]; ok {
		return &field{kind: typ, size: n}, nil
	}
	if rest, ok := strings.CutPrefix(typ, "["); ok {
		num, elem, ok := strings.Cut(rest, "]")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n <= 0 || n > 1<<20 {
			return nil, fmt.Errorf("bad array type %q", typ)
		}
		e, err := parseType(elem)
		if err != nil {
			return nil, err
		}
		return &field{n: n, elem: e, size: n * e.size}, nil
	}
	return nil, fmt.Errorf("unknown type %q (int8-64, uint8-64, float32, float64, bool, byte, [N]TYPE)", typ)
}

// align is the field's alignment in a Go struct on a 64-bit platform.
func (f *field) align() int {
	if f.elem != nil {
		return f.elem.align()
	}
	return f.size
}

// decode returns msg's fields as a JSON object, in the layout's order.
func (l *layout) decode(msg []byte) ([]byte, error) {
	if len(msg) != l.size {
		return nil, fmt.Errorf("a %d-byte message, the layout is %d bytes", len(msg), l.size)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, f := range l.fields {
		if f.name == "_" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(f.name))
		b.WriteByte(':')
		f.write(&b, msg[f.off:f.off+f.size])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (f *field) write(b *bytes.Buffer, v []byte) {
	le := binary.LittleEndian
	switch f.kind {
	case "int8":
		b.WriteString(strconv.FormatInt(int64(int8(v[0])), 10))
	case "int16":
		b.WriteString(strconv.FormatInt(int64(int16(le.Uint16(v))), 10))
	case "int32":
		b.WriteString(strconv.FormatInt(int64(int32(le.Uint32(v))), 10))
	case "int64":
		b.WriteString(strconv.FormatInt(int64(le.Uint64(v)), 10))
	case "uint8", "byte":
		b.WriteString(strconv.FormatUint(uint64(v[0]), 10))
	case "uint16":
		b.WriteString(strconv.FormatUint(uint64(le.Uint16(v)), 10))
	case "uint32":
		b.WriteString(strconv.FormatUint(uint64(le.Uint32(v)), 10))
	case "uint64":
		b.WriteString(strconv.FormatUint(le.Uint64(v), 10))
	case "float32":
		writeFloat(b, float64(math.Float32frombits(le.Uint32(v))), 32)
	case "float64":
		writeFloat(b, math.Float64frombits(le.Uint64(v)), 64)
	case "bool":
		b.WriteString(strconv.FormatBool(v[0] != 0))
	default: // an array
		if f.elem.kind == "byte" || f.elem.kind == "uint8" {
			if s := bytes.TrimRight(v, "\x00"); utf8.Valid(s) && printable(s) {
				b.WriteString(strconv.Quote(string(s)))
			} else {
				b.WriteString(strconv.Quote(hex.EncodeToString(v)))
			}
			return
		}
		b.WriteByte('[')
		for i := range f.n {
			if i > 0 {
				b.WriteByte(',')
			}
			f.elem.write(b, v[i*f.elem.size:(i+1)*f.elem.size])
		}
		b.WriteByte(']')
	}
}

// writeFloat writes a float as JSON, which has no NaN or infinities: those
// are strings.
func writeFloat(b *bytes.Buffer, x float64, bits int) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		b.WriteString(strconv.Quote(strconv.FormatFloat(x, 'g', -1, bits)))
		return
	}
	b.WriteString(strconv.FormatFloat(x, 'g', -1, bits))
}
