package values

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Errors returned by NewCodec. Every rejection of a type matches
// ErrNotTriviallyCopyable and one of the more specific errors below.
var (
	// ErrNotTriviallyCopyable: the type cannot be stored as a raw copy of
	// its memory.
	ErrNotTriviallyCopyable = errors.New("values: type is not trivially copyable")
	// ErrPointers: the type holds a pointer, slice, string, map, interface,
	// channel or func; its bytes would be meaningless in another process.
	ErrPointers = errors.New("values: type holds pointers")
	// ErrPlatformSize: int, uint and uintptr change size between platforms.
	ErrPlatformSize = errors.New("values: type has a platform-dependent size")
	// ErrPadding: the compiler inserted padding, or a field is not at its
	// natural alignment; both make the layout platform- or
	// compiler-dependent and the padding bytes undefined.
	ErrPadding = errors.New("values: type has implicit padding")
	// ErrBool: a bool decoded from arbitrary bytes may hold a bit pattern
	// other than 0 or 1, which Go code does not expect.
	ErrBool = errors.New("values: type holds a bool")
	// ErrEmpty: a zero-size type has nothing to store.
	ErrEmpty = errors.New("values: type has zero size")
	// ErrBigEndian: the codec writes native byte order and the format is
	// little-endian, so it refuses to run on a big-endian machine.
	ErrBigEndian = errors.New("values: big-endian platform; the trivially-copyable format is little-endian")
)

// ErrSize is returned by Encode and Decode when the buffer's length is not
// the codec's Size: a value of another length is another type or version.
var ErrSize = errors.New("values: buffer length is not the codec's size")

var bigEndian = binary.NativeEndian.Uint16([]byte{1, 0}) != 1

// Codec stores a trivially-copyable struct (or array or number) as its
// memory image: Encode and Decode are one copy each, with no reflection and
// no allocation at run time. NewCodec checks once that the image is the
// same on every little-endian platform and carries no pointers, so it can
// live in a file or shared memory and be read by another process.
//
// The format is the type's fields in declaration order, each at its
// natural alignment, little-endian, with no padding. Changing the type
// changes the format; Layout describes it for a version check.
//
// A Codec is immutable and safe for concurrent use.
type Codec[T any] struct {
	size      int
	alignMask uintptr // natural alignment - 1
	layout    string
}

// NewCodec returns a codec for T, or an error saying which field breaks
// the rules: no pointers of any kind (pointer, slice, string, map,
// interface, chan, func, unsafe.Pointer), no int, uint or uintptr (their
// size depends on the platform; use int64 and friends), no bool (use
// uint8), and no implicit padding: every field must sit at an offset that
// is a multiple of its natural alignment with no gap before it, and the
// size must be the sum of the field sizes. Add explicit padding fields
// (_ [4]byte) or reorder the fields to fix padding. Nested structs and
// arrays are checked the same way.
func NewCodec[T any]() (*Codec[T], error) {
	if bigEndian {
		return nil, ErrBigEndian
	}
	t := reflect.TypeFor[T]()
	align, err := check(t, t.String())
	if err != nil {
		return nil, err
	}
	if t.Size() == 0 {
		return nil, fmt.Errorf("%w: %w: %s", ErrNotTriviallyCopyable, ErrEmpty, t)
	}
	return &Codec[T]{size: int(t.Size()), alignMask: uintptr(align - 1), layout: describe(t)}, nil
}

// MustCodec is NewCodec for package-level variables: it panics on error.
func MustCodec[T any]() *Codec[T] {
	c, err := NewCodec[T]()
	if err != nil {
		panic(err)
	}
	return c
}

// Size returns the length of an encoded value in bytes.
func (c *Codec[T]) Size() int { return c.size }

// Layout describes the format: field names, types and offsets. Store it (or
// a hash of it) next to encoded data to detect a changed type.
func (c *Codec[T]) Layout() string { return c.layout }

// Encode copies *v into dst, which must be exactly Size bytes long.
func (c *Codec[T]) Encode(dst []byte, v *T) error {
	if len(dst) != c.size {
		return ErrSize
	}
	store(dst, v, c.alignMask)
	return nil
}

// Append appends the encoding of *v to dst; it allocates only when dst
// lacks capacity.
func (c *Codec[T]) Append(dst []byte, v *T) []byte {
	return append(dst, bytesOf(v, c.size)...)
}

// Decode copies src, which must be exactly Size bytes long, into *v.
func (c *Codec[T]) Decode(src []byte, v *T) error {
	if len(src) != c.size {
		return ErrSize
	}
	load(v, src, c.alignMask)
	return nil
}

// View returns *v's memory as a byte slice of length and capacity Size,
// aliasing v: writing to the slice writes to v. It saves a copy where an
// API takes or fills bytes, for example an offmap:
//
//	err := m.Put(key, c.View(&v))              // one copy, into the map
//	b, err := m.AppendValue(c.View(&v)[:0], key) // one copy, out of it
//	if err == nil && len(b) != c.Size() { /* stored value has another type */ }
//
// When the stored value is longer than Size, append moves to new memory
// and v is left untouched; when it is shorter, v is partly overwritten, so
// check the length. The slice keeps v alive; v may move to the heap.
func (c *Codec[T]) View(v *T) []byte { return bytesOf(v, c.size) }

// check verifies t and returns its natural alignment: the alignment the
// layout rules assume on every platform (a number's size, the largest
// alignment among a struct's fields), not t.Align(), which is 4 for int64
// on 32-bit platforms.
func check(t reflect.Type, path string) (int, error) {
	switch t.Kind() {
	case reflect.Int8, reflect.Uint8:
		return 1, nil
	case reflect.Int16, reflect.Uint16:
		return 2, nil
	case reflect.Int32, reflect.Uint32, reflect.Float32, reflect.Complex64:
		return 4, nil
	case reflect.Int64, reflect.Uint64, reflect.Float64, reflect.Complex128:
		return 8, nil
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		return 0, fmt.Errorf("%w: %w: %s is %s (use a sized type such as int64)",
			ErrNotTriviallyCopyable, ErrPlatformSize, path, t.Kind())
	case reflect.Bool:
		return 0, fmt.Errorf("%w: %w: %s is bool (use uint8)", ErrNotTriviallyCopyable, ErrBool, path)
	case reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.String,
		reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
		return 0, fmt.Errorf("%w: %w: %s is a %s", ErrNotTriviallyCopyable, ErrPointers, path, t.Kind())
	case reflect.Array:
		return check(t.Elem(), path+"[0]")
	case reflect.Struct:
		return checkStruct(t, path)
	}
	return 0, fmt.Errorf("%w: %s has unsupported kind %s", ErrNotTriviallyCopyable, path, t.Kind())
}

func checkStruct(t reflect.Type, path string) (int, error) {
	align, sum := 1, uintptr(0)
	for i := range t.NumField() {
		f := t.Field(i)
		fpath := path + "." + f.Name
		a, err := check(f.Type, fpath)
		if err != nil {
			return 0, err
		}
		if f.Offset != sum {
			return 0, fmt.Errorf("%w: %w: %d bytes before %s at offset %d (reorder fields or add _ [%d]byte)",
				ErrNotTriviallyCopyable, ErrPadding, f.Offset-sum, fpath, f.Offset, f.Offset-sum)
		}
		if f.Offset%uintptr(a) != 0 {
			return 0, fmt.Errorf("%w: %w: %s at offset %d is not %d-byte aligned on 64-bit platforms",
				ErrNotTriviallyCopyable, ErrPadding, fpath, f.Offset, a)
		}
		align = max(align, a)
		sum += f.Type.Size()
	}
	if t.Size() != sum {
		return 0, fmt.Errorf("%w: %w: %d bytes at the end of %s (add _ [%d]byte as the last field)",
			ErrNotTriviallyCopyable, ErrPadding, t.Size()-sum, path, t.Size()-sum)
	}
	if sum%uintptr(align) != 0 {
		// Go would pad this on a platform that aligns as we assume.
		pad := uintptr(align) - sum%uintptr(align)
		return 0, fmt.Errorf("%w: %w: %s is %d bytes, not a multiple of its %d-byte alignment (add _ [%d]byte)",
			ErrNotTriviallyCopyable, ErrPadding, path, sum, align, pad)
	}
	return align, nil
}

// describe renders t's format: numbers by kind, arrays by length, structs
// as their fields with offsets. It ignores type names, which do not
// change the bytes.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Array:
		return "[" + strconv.Itoa(t.Len()) + "]" + describe(t.Elem())
	case reflect.Struct:
		var b strings.Builder
		b.WriteByte('{')
		for i := range t.NumField() {
			f := t.Field(i)
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s %s @%d", f.Name, describe(f.Type), f.Offset)
		}
		b.WriteByte('}')
		return b.String()
	}
	return t.Kind().String()
}
