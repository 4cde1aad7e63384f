package serial

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/offmap/offmap/values"
)

var codec = values.MustCodec[MarketData]()

// The three encodings are byte-for-byte identical.
func TestFormatsAgree(t *testing.T) {
	m := Sample()
	if codec.Size() != Size || binary.Size(&m) != Size {
		t.Fatalf("sizes: codec %d, binary %d, want %d", codec.Size(), binary.Size(&m), Size)
	}
	refl := make([]byte, Size)
	if _, err := binary.Encode(refl, binary.LittleEndian, &m); err != nil {
		t.Fatal(err)
	}
	expl := make([]byte, Size)
	WriteExplicit(expl, &m)
	triv := make([]byte, Size)
	if err := codec.Encode(triv, &m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(refl, expl) || !bytes.Equal(refl, triv) {
		t.Fatalf("encodings differ:\nreflect  %x\nexplicit %x\ntrivial  %x", refl, expl, triv)
	}
	for name, read := range map[string]func([]byte, *MarketData) error{
		"reflect":  func(b []byte, m *MarketData) error { _, err := binary.Decode(b, binary.LittleEndian, m); return err },
		"explicit": func(b []byte, m *MarketData) error { ReadExplicit(b, m); return nil },
		"trivial":  codec.Decode,
	} {
		var got MarketData
		if err := read(refl, &got); err != nil || got != m {
			t.Errorf("%s read %+v, %v; want %+v", name, got, err, m)
		}
	}
}

func TestExplicitAndTrivialDoNotAllocate(t *testing.T) {
	m, out := Sample(), MarketData{}
	buf := make([]byte, Size)
	if n := testing.AllocsPerRun(100, func() {
		WriteExplicit(buf, &m)
		ReadExplicit(buf, &out)
		_ = codec.Encode(buf, &m)
		_ = codec.Decode(buf, &out)
	}); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}

// The benchmarks mirror the article's JMH runner: write one record at
// position 0 of a buffer, or read one record from a buffer written once.

type fixture struct {
	m    MarketData
	to   []byte
	from []byte
}

func newFixture(b *testing.B) *fixture {
	f := &fixture{m: Sample(), to: make([]byte, Size), from: make([]byte, Size)}
	WriteExplicit(f.from, &f.m)
	b.SetBytes(Size)
	b.ReportAllocs()
	reportThreadCPU(b)
	return f
}

// reportThreadCPU adds a cpu-ns/op metric: the benchmark thread's own CPU
// time per operation. On a shared machine ns/op (wall time) also counts
// the time the thread waited while other processes ran; cpu-ns/op does
// not, so it is the steadier figure there.
func reportThreadCPU(b *testing.B) {
	runtime.LockOSThread()
	start := threadCPU(b)
	b.Cleanup(func() {
		if b.N > 0 && start >= 0 {
			b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
		}
		runtime.UnlockOSThread()
	})
}

func BenchmarkReflectWrite(b *testing.B) {
	f := newFixture(b)
	for b.Loop() {
		if _, err := binary.Encode(f.to, binary.LittleEndian, &f.m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReflectRead(b *testing.B) {
	f := newFixture(b)
	for b.Loop() {
		if _, err := binary.Decode(f.from, binary.LittleEndian, &f.m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExplicitWrite(b *testing.B) {
	f := newFixture(b)
	for b.Loop() {
		WriteExplicit(f.to, &f.m)
	}
}

func BenchmarkExplicitRead(b *testing.B) {
	f := newFixture(b)
	for b.Loop() {
		ReadExplicit(f.from, &f.m)
	}
}

func BenchmarkTrivialWrite(b *testing.B) {
	f := newFixture(b)
	for b.Loop() {
		if err := codec.Encode(f.to, &f.m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrivialRead(b *testing.B) {
	f := newFixture(b)
	for b.Loop() {
		if err := codec.Decode(f.from, &f.m); err != nil {
			b.Fatal(err)
		}
	}
}

// The trivially-copyable codec falls back to a byte-wise copy when the
// buffer is not aligned for the struct; these show what that costs.

func BenchmarkTrivialWriteUnaligned(b *testing.B) {
	f := newFixture(b)
	to := make([]byte, Size+1)[1:]
	for b.Loop() {
		if err := codec.Encode(to, &f.m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrivialReadUnaligned(b *testing.B) {
	f := newFixture(b)
	from := make([]byte, Size+1)[1:]
	copy(from, f.from)
	for b.Loop() {
		if err := codec.Decode(from, &f.m); err != nil {
			b.Fatal(err)
		}
	}
}
