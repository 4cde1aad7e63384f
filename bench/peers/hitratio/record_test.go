package hitratio

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// BenchmarkRecordAccess: what recording a hit costs readers on all cores
// (run it with -cpu 1,2): random lookups of words in a table of 1M, as
// slots in a map file, (read) loading the word only; (set-if-clear)
// loading it and setting a visited bit with an atomic OR only when it is
// clear, as an evicting map would; (always-set) an atomic OR on every
// lookup. Uniform keys and Zipf 0.9 keys, whose hot words every core
// shares. Heap memory behaves as mapped memory here: the cost is the
// cache line's travel between cores.
func BenchmarkRecordAccess(b *testing.B) {
	const words = 1 << 20
	const visited = 1 << 63
	for _, dist := range []string{"uniform", "zipf0.9"} {
		idx := make([]uint32, 1<<22)
		if dist == "uniform" {
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range idx {
				idx[i] = uint32(rng.IntN(words))
			}
		} else {
			for i, k := range ZipfTrace(words, len(idx), 0.9, 1).Keys {
				idx[i] = uint32(k)
			}
		}
		for _, mode := range []string{"read", "set-if-clear", "always-set"} {
			b.Run(dist+"/"+mode, func(b *testing.B) {
				table := make([]atomic.Uint64, words)
				for i := range table {
					table[i].Store(uint64(i))
				}
				var seed atomic.Uint32
				b.RunParallel(func(pb *testing.PB) {
					i := int(seed.Add(1)) * 7919 // each core its own place in the sequence
					var sum uint64
					for pb.Next() {
						w := &table[idx[i&(len(idx)-1)]]
						v := w.Load()
						switch mode {
						case "set-if-clear":
							if v&visited == 0 {
								w.Or(visited)
							}
						case "always-set":
							w.Or(visited)
						}
						sum += v
						i++
					}
					if sum == 1 {
						b.Log(sum) // keep the loads
					}
				})
			})
		}
	}
}
