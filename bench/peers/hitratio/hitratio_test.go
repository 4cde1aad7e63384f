package hitratio

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLRUExact(t *testing.T) {
	c := NewLRU(2)
	var got []bool
	for _, k := range []uint64{1, 2, 1, 3, 2, 1} {
		got = append(got, c.Access(k))
	}
	// 3 evicts 2 (1 was used since), 2 then evicts 1.
	if want := []bool{false, false, true, false, false, false}; !slices.Equal(got, want) {
		t.Fatalf("hits %v, want %v", got, want)
	}
}

// Every policy stays within its capacity, hits a key requested twice in
// a row, and misses a key never requested. The libraries are allowed a
// few misses on the repeat: their admission filters may turn a new key
// away (ristretto) and their policy work runs behind a buffer (theine),
// so a key set a moment ago can already be gone. Our models are exact.
func TestPoliciesBasics(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range Policies {
		library := p.Name == "otter v2" || p.Name == "theine" || p.Name == "ristretto v2"
		c := p.New(100)
		if cl, ok := c.(interface{ Close() error }); ok {
			defer cl.Close()
		}
		repeats, missed := 0, 0
		for i := range 20000 {
			k := uint64(rng.IntN(1000))
			c.Access(k)
			if n := c.Len(); n > 100 && p.Name != "otter v2" && p.Name != "theine" { // estimated sizes may pass it briefly
				t.Fatalf("%s: %d entries, capacity 100", p.Name, n)
			}
			if i%100 == 0 {
				repeats++
				if !c.Access(k) {
					missed++
					if !library {
						t.Fatalf("%s: key %d missed right after it was requested", p.Name, k)
					}
				}
			}
		}
		if p.Name != "ristretto v2" && missed > repeats/10 {
			t.Errorf("%s: %d of %d keys missed right after they were requested", p.Name, missed, repeats)
		}
		if c.Access(1 << 40) {
			t.Fatalf("%s: a key never requested was a hit", p.Name)
		}
	}
}

// A scan of cold keys five times the cache's size flushes LRU's hot set
// but not S3-FIFO's: what scan resistance means.
func TestScanResistance(t *testing.T) {
	hotAfterScan := func(c Cache) float64 {
		for range 10 {
			for k := range 100 {
				c.Access(uint64(k))
			}
		}
		for k := range 1000 {
			c.Access(uint64(1000 + k))
		}
		hits := 0
		for k := range 100 {
			if c.Access(uint64(k)) {
				hits++
			}
		}
		return float64(hits) / 100
	}
	if r := hotAfterScan(NewLRU(200)); r != 0 {
		t.Errorf("LRU kept %.0f %% of the hot set through the scan, want 0", 100*r)
	}
	if r := hotAfterScan(NewS3FIFO(200)); r < 0.9 {
		t.Errorf("S3-FIFO kept %.0f %% of the hot set through the scan, want at least 90 %%", 100*r)
	}
	c := NewOffmap(200)
	defer c.Close()
	if r := hotAfterScan(c); r < 0.9 {
		t.Errorf("offmap kept %.0f %% of the hot set through the scan, want at least 90 %%", 100*r)
	}
}

// The Zipf sampler's rank frequencies follow 1/rank^s.
func TestZipf(t *testing.T) {
	const n, draws, s = 1000, 1_000_000, 0.9
	z := newZipf(n, s, 7)
	counts := make([]int, n)
	for range draws {
		counts[z.next()]++
	}
	h := 0.0
	for i := range n {
		h += 1 / math.Pow(float64(i+1), s)
	}
	for _, r := range []int{0, 1, 9, 99} {
		want := draws / math.Pow(float64(r+1), s) / h
		if got := float64(counts[r]); math.Abs(got-want) > 5*math.Sqrt(want) {
			t.Errorf("rank %d drawn %v times, want about %.0f", r, got, want)
		}
	}
}

func TestScanTrace(t *testing.T) {
	tr := ScanTrace(1000, 10000, 0.9, 1000, 50, 3)
	if len(tr.Keys) != 10000+9*50 {
		t.Fatalf("%d requests", len(tr.Keys))
	}
	seen := map[uint64]int{}
	for _, k := range tr.Keys {
		seen[k]++
	}
	for k, n := range seen {
		if k >= 1000 && n != 1 {
			t.Fatalf("cold key %d requested %d times", k, n)
		}
	}
}
