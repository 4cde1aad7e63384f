package queue

import (
	"testing"
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
