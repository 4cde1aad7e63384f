package shm

// Pad8 rounds n up to a multiple of 8.
func Pad8(n int) int { return (n + 7) &^ 7 }

// Pad rounds n up to a multiple of a, a power of two.
func Pad[T ~int | ~int64 | ~uint64](n, a T) T { return (n + a - 1) &^ (a - 1) }
