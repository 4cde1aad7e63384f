package queue

import (
	"strconv"
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

// The cost of Options.ChecksumMessages: append, and read with Next, of
// 16- and 256-byte messages, with checksums off and on (docs/BENCHMARKS.md).
// Reads go over messages appended before the timer starts.
func BenchmarkChecksumMessages(b *testing.B) {
	for _, sums := range []string{"off", "on"} {
		o := Options{BlockSize: 4 << 20, ChecksumMessages: sums == "on"}
		for _, size := range []int{16, 256} {
			msg := make([]byte, size)
			b.Run("append/"+strconv.Itoa(size)+"/"+sums, func(b *testing.B) {
				q := openT(b, b.TempDir(), o)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := q.Append(msg); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("read/"+strconv.Itoa(size)+"/"+sums, func(b *testing.B) {
				q := openT(b, b.TempDir(), o)
				for i := 0; i < b.N; i++ {
					if _, err := q.Append(msg); err != nil {
						b.Fatal(err)
					}
				}
				tl := tailerT(b, q)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, _, err := tl.Next(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
