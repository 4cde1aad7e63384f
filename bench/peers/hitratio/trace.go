package hitratio

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Trace is a sequence of requested keys and a name for it.
type Trace struct {
	Name string
	Keys []uint64
}

// zipf draws ranks 0..n-1 with probability proportional to 1/(rank+1)^s,
// any s > 0 (math/rand's Zipf needs s > 1).
type zipf struct {
	cdf []float64
	rng *rand.Rand
}

func newZipf(n int, s float64, seed uint64) *zipf {
	cdf := make([]float64, n)
	sum := 0.0
	for i := range n {
		sum += 1 / math.Pow(float64(i+1), s)
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	return &zipf{cdf: cdf, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (z *zipf) next() int {
	u := z.rng.Float64()
	return sort.SearchFloat64s(z.cdf, u)
}

// ZipfTrace returns length requests of keys 0..keys-1, Zipf(s) by a
// random ranking of the keys.
func ZipfTrace(keys, length int, s float64, seed uint64) Trace {
	z := newZipf(keys, s, seed)
	perm := rand.New(rand.NewPCG(seed, 2)).Perm(keys)
	t := Trace{Name: fmt.Sprintf("zipf %.1f", s), Keys: make([]uint64, length)}
	for i := range t.Keys {
		t.Keys[i] = uint64(perm[z.next()])
	}
	return t
}

// ScanTrace is ZipfTrace(s) with a scan of scanLen keys never requested
// before (nor after) every `every` requests: the hot set must survive it.
func ScanTrace(keys, length int, s float64, every, scanLen int, seed uint64) Trace {
	base := ZipfTrace(keys, length, s, seed)
	t := Trace{Name: fmt.Sprintf("zipf %.1f + scans of %d", s, scanLen), Keys: make([]uint64, 0, length+length/every*scanLen)}
	cold := uint64(keys)
	for i, k := range base.Keys {
		if i > 0 && i%every == 0 {
			for range scanLen {
				t.Keys = append(t.Keys, cold)
				cold++
			}
		}
		t.Keys = append(t.Keys, k)
	}
	return t
}
