package values

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"unsafe"
)

type quote struct {
	ID    int64
	Time  int64
	Bid   [4]float64
	Ask   [4]float64
	Qty   [2]int32
	Flags uint16
	Venue uint8
	Side  int8
	_     [4]byte // explicit padding is fine
}

type small struct {
	A uint32
	B uint16
	C int16
	D float64
	E complex64
}

func TestCodecRoundTrip(t *testing.T) {
	c, err := NewCodec[quote]()
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() != int(unsafe.Sizeof(quote{})) {
		t.Fatalf("Size %d, want %d", c.Size(), unsafe.Sizeof(quote{}))
	}
	in := quote{ID: -7, Time: 1 << 62, Bid: [4]float64{1.5, math.Inf(1), -0.0, 3},
		Ask: [4]float64{math.NaN(), 2, 3, 4}, Qty: [2]int32{-1, 1}, Flags: 0xbeef, Venue: 9, Side: -2}

	buf := make([]byte, c.Size())
	if err := c.Encode(buf, &in); err != nil {
		t.Fatal(err)
	}
	var out quote
	if err := c.Decode(buf, &out); err != nil {
		t.Fatal(err)
	}
	// NaN != NaN, so compare images.
	if !bytes.Equal(c.View(&in), c.View(&out)) {
		t.Fatalf("round trip changed the value:\n in %+v\nout %+v", in, out)
	}
	if got := c.Append([]byte("hdr"), &in); string(got[:3]) != "hdr" || !bytes.Equal(got[3:], buf) {
		t.Fatal("Append did not append the encoding")
	}

	// Decoding from an unaligned buffer is fine: the copy is byte-wise.
	odd := make([]byte, c.Size()+1)
	copy(odd[1:], buf)
	var out2 quote
	if err := c.Decode(odd[1:], &out2); err != nil || !bytes.Equal(c.View(&out2), buf) {
		t.Fatalf("unaligned decode: %v", err)
	}
	clear(odd)
	if err := c.Encode(odd[1:], &in); err != nil || !bytes.Equal(odd[1:], buf) || odd[0] != 0 {
		t.Fatalf("unaligned encode: %v", err)
	}
}

// The format is little-endian, fields in order, no padding.
func TestCodecFormat(t *testing.T) {
	c := MustCodec[small]()
	if c.Size() != 24 {
		t.Fatalf("Size %d, want 24", c.Size())
	}
	v := small{A: 0x01020304, B: 0x0506, C: -2, D: 1.25, E: complex(2, -3)}
	want := make([]byte, 0, 24)
	want = binary.LittleEndian.AppendUint32(want, v.A)
	want = binary.LittleEndian.AppendUint16(want, v.B)
	want = binary.LittleEndian.AppendUint16(want, uint16(v.C))
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(v.D))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(2))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(-3))
	if got := c.Append(nil, &v); !bytes.Equal(got, want) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want)
	}
	const layout = "{A uint32 @0; B uint16 @4; C int16 @6; D float64 @8; E complex64 @16}"
	if c.Layout() != layout {
		t.Fatalf("Layout %q, want %q", c.Layout(), layout)
	}
}

func TestCodecSizeErrors(t *testing.T) {
	c := MustCodec[small]()
	var v small
	for _, n := range []int{0, 23, 25} {
		if err := c.Encode(make([]byte, n), &v); !errors.Is(err, ErrSize) {
			t.Errorf("Encode into %d bytes: %v, want ErrSize", n, err)
		}
		if err := c.Decode(make([]byte, n), &v); !errors.Is(err, ErrSize) {
			t.Errorf("Decode from %d bytes: %v, want ErrSize", n, err)
		}
	}
}

type (
	withPtr     struct{ P *int64 }
	withSlice   struct{ S []byte }
	withString  struct{ S string }
	withMap     struct{ M map[int64]int64 }
	withIface   struct{ I any }
	withChan    struct{ C chan int64 }
	withFunc    struct{ F func() }
	withUnsafe  struct{ P unsafe.Pointer }
	withInt     struct{ N int }
	withUint    struct{ N uint }
	withUintptr struct{ N uintptr }
	withBool    struct{ B bool }
	gapBefore   struct {
		A int32
		B int64
	}
	gapAfter struct {
		A int64
		B int32
	}
	zeroAtEnd struct {
		A int64
		Z [0]int64
	}
	nested    struct{ Inner struct{ S string } }
	nestedPad struct {
		X     int64
		Inner gapAfter
	}
	arrayOfBad struct{ Legs [3]withPtr }
	empty      struct{}
	// Padded by hand: accepted.
	padded struct {
		A int32
		_ [4]byte
		B int64
	}
)

func TestCodecRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func() error
		want error
	}{
		{"pointer", codecErr[withPtr], ErrPointers},
		{"slice", codecErr[withSlice], ErrPointers},
		{"string", codecErr[withString], ErrPointers},
		{"map", codecErr[withMap], ErrPointers},
		{"interface", codecErr[withIface], ErrPointers},
		{"chan", codecErr[withChan], ErrPointers},
		{"func", codecErr[withFunc], ErrPointers},
		{"unsafe.Pointer", codecErr[withUnsafe], ErrPointers},
		{"top-level string", codecErr[string], ErrPointers},
		{"int", codecErr[withInt], ErrPlatformSize},
		{"uint", codecErr[withUint], ErrPlatformSize},
		{"uintptr", codecErr[withUintptr], ErrPlatformSize},
		{"bool", codecErr[withBool], ErrBool},
		{"gap before field", codecErr[gapBefore], ErrPadding},
		{"trailing padding", codecErr[gapAfter], ErrPadding},
		{"zero-size last field", codecErr[zeroAtEnd], ErrPadding},
		{"nested string", codecErr[nested], ErrPointers},
		{"nested padding", codecErr[nestedPad], ErrPadding},
		{"array of pointers", codecErr[arrayOfBad], ErrPointers},
		{"empty", codecErr[empty], ErrEmpty},
	} {
		err := tc.new()
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrNotTriviallyCopyable) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := codecErr[padded](); err != nil {
		t.Errorf("explicitly padded struct rejected: %v", err)
	}
	for _, f := range []func() error{codecErr[int64], codecErr[[16]float64], codecErr[complex128]} {
		if err := f(); err != nil {
			t.Errorf("plain fixed-size type rejected: %v", err)
		}
	}
}

// The error names the field, so the user knows what to change.
func TestCodecErrorNamesField(t *testing.T) {
	err := codecErr[arrayOfBad]()
	if want := "values.arrayOfBad.Legs[0].P"; err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("error %v does not name %s", err, want)
	}
}

func codecErr[T any]() error {
	_, err := NewCodec[T]()
	return err
}

func TestCodecNoAllocs(t *testing.T) {
	c := MustCodec[quote]()
	var v quote
	buf := make([]byte, c.Size())
	dst := make([]byte, 0, c.Size())
	if n := testing.AllocsPerRun(100, func() {
		_ = c.Encode(buf, &v)
		_ = c.Decode(buf, &v)
		dst = c.Append(dst[:0], &v)
	}); n != 0 {
		t.Fatalf("%v allocations per Encode+Decode+Append, want 0", n)
	}
}

// byteStore mimics the byte API of an offmap (Put copies the value in,
// AppendValue copies it out) so the one-copy pattern is tested here
// without importing the map.
type byteStore map[string][]byte

func (s byteStore) Put(key, value []byte) error {
	s[string(key)] = bytes.Clone(value)
	return nil
}

func (s byteStore) AppendValue(dst, key []byte) ([]byte, error) {
	v, ok := s[string(key)]
	if !ok {
		return dst, errors.New("not found")
	}
	return append(dst, v...), nil
}

func TestCodecViewWithByteStore(t *testing.T) {
	c := MustCodec[quote]()
	s := byteStore{}
	in := quote{ID: 42, Bid: [4]float64{1, 2, 3, 4}}
	if err := s.Put([]byte("k"), c.View(&in)); err != nil {
		t.Fatal(err)
	}
	var out quote
	b, err := s.AppendValue(c.View(&out)[:0], []byte("k"))
	if err != nil || len(b) != c.Size() {
		t.Fatalf("AppendValue: %v, %d bytes", err, len(b))
	}
	if out != in {
		t.Fatalf("read %+v, want %+v", out, in)
	}
	if &b[0] != &c.View(&out)[0] {
		t.Fatal("AppendValue into View did not write in place")
	}

	// A longer stored value leaves the destination untouched.
	s["long"] = make([]byte, c.Size()+8)
	keep := out
	b, _ = s.AppendValue(c.View(&out)[:0], []byte("long"))
	if len(b) == c.Size() || out != keep {
		t.Fatal("longer value: want a length mismatch and an untouched value")
	}
}

func FuzzCodecRoundTrip(f *testing.F) {
	c := MustCodec[quote]()
	f.Add(make([]byte, c.Size()))
	f.Add(bytes.Repeat([]byte{0xff}, c.Size()))
	f.Fuzz(func(t *testing.T, in []byte) {
		var v quote
		err := c.Decode(in, &v)
		if len(in) != c.Size() {
			if !errors.Is(err, ErrSize) {
				t.Fatalf("Decode of %d bytes: %v", len(in), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, c.Size())
		if err := c.Encode(out, &v); err != nil || !bytes.Equal(in, out) {
			t.Fatalf("any bit pattern must round-trip: %v", err)
		}
	})
}
