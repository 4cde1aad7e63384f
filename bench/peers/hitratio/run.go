package hitratio

// Policy names a cache and makes one of a capacity.
type Policy struct {
	Name string
	New  func(capacity int) Cache
}

// Policies are those compared, the models first.
var Policies = []Policy{
	{"LRU (exact)", func(n int) Cache { return NewLRU(n) }},
	{"CLOCK", func(n int) Cache { return NewClock(n) }},
	{"SIEVE", func(n int) Cache { return NewSieve(n) }},
	{"S3-FIFO", func(n int) Cache { return NewS3FIFO(n) }},
	{"otter v2", func(n int) Cache { return NewOtter(n) }},
	{"theine", func(n int) Cache { return NewTheine(n) }},
	{"ristretto v2", func(n int) Cache { return NewRistretto(n) }},
	{"offmap (Evict)", func(n int) Cache { return NewOffmap(n) }},
}

// HitRatio plays t through c and returns the fraction of hits among the
// requests after the first warm ones.
func HitRatio(c Cache, t Trace, warm int) float64 {
	if cl, ok := c.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	hits, n := 0, 0
	for i, k := range t.Keys {
		hit := c.Access(k)
		if i >= warm {
			n++
			if hit {
				hits++
			}
		}
	}
	return float64(hits) / float64(n)
}
