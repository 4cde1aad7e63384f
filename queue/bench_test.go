package queue

import (
	"testing"
	"unsafe"
)

func benchAppend(b *testing.B, size int) {
	q := openT(b, b.TempDir(), Options{BlockSize: 4 << 20})
	msg := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := q.Append(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppend16(b *testing.B)  { benchAppend(b, 16) }
func BenchmarkAppend256(b *testing.B) { benchAppend(b, 256) }

func BenchmarkAppendRead16(b *testing.B) {
	q := openT(b, b.TempDir(), Options{BlockSize: 4 << 20})
	tl := tailerT(b, q)
	msg := make([]byte, 16)
	b.SetBytes(16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := q.Append(msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := tl.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// Typed messages (NewAppender, NewReader) against raw Append and Next of
// the same 48 bytes.
func BenchmarkTypedAppendRead(b *testing.B) {
	q := openT(b, b.TempDir(), Options{BlockSize: 4 << 20})
	a, err := NewAppender[trade](q)
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewReader[trade](tailerT(b, q))
	if err != nil {
		b.Fatal(err)
	}
	v, got := tradeOf(1), trade{}
	b.SetBytes(int64(unsafe.Sizeof(v)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := a.Append(&v); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Next(&got); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawAppendRead48(b *testing.B) {
	q := openT(b, b.TempDir(), Options{BlockSize: 4 << 20})
	tl := tailerT(b, q)
	msg := make([]byte, unsafe.Sizeof(trade{}))
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := q.Append(msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := tl.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
