package hitratio

import (
	theine "github.com/Yiling-J/theine-go"
	"github.com/dgraph-io/ristretto/v2"
	"github.com/maypok86/otter/v2"
)

// Otter is github.com/maypok86/otter/v2 (W-TinyLFU with an adaptive
// window) bounded to capacity entries.
type Otter struct {
	c *otter.Cache[uint64, struct{}]
}

func NewOtter(capacity int) *Otter {
	return &Otter{otter.Must(&otter.Options[uint64, struct{}]{MaximumSize: capacity})}
}

func (c *Otter) Access(k uint64) bool {
	if _, ok := c.c.GetIfPresent(k); ok {
		return true
	}
	c.c.Set(k, struct{}{})
	return false
}

func (c *Otter) Len() int { return c.c.EstimatedSize() }

// Theine is github.com/Yiling-J/theine-go (W-TinyLFU).
type Theine struct {
	c *theine.Cache[uint64, struct{}]
}

func NewTheine(capacity int) *Theine {
	c, err := theine.NewBuilder[uint64, struct{}](int64(capacity)).Build()
	if err != nil {
		panic(err)
	}
	return &Theine{c}
}

func (c *Theine) Access(k uint64) bool {
	if _, ok := c.c.Get(k); ok {
		return true
	}
	c.c.Set(k, struct{}{}, 1)
	return false
}

func (c *Theine) Len() int { return c.c.Len() }

// Ristretto is github.com/dgraph-io/ristretto/v2 (TinyLFU admission,
// sampled LFU eviction), waited on after every Set so that its buffers
// drop nothing.
type Ristretto struct {
	c *ristretto.Cache[uint64, struct{}]
}

func NewRistretto(capacity int) *Ristretto {
	c, err := ristretto.NewCache(&ristretto.Config[uint64, struct{}]{
		NumCounters: 10 * int64(capacity), MaxCost: int64(capacity), BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		panic(err)
	}
	return &Ristretto{c}
}

func (c *Ristretto) Access(k uint64) bool {
	if _, ok := c.c.Get(k); ok {
		return true
	}
	c.c.Set(k, struct{}{}, 1)
	c.c.Wait()
	return false
}

func (c *Ristretto) Len() int { return int(c.c.Metrics.KeysAdded() - c.c.Metrics.KeysEvicted()) }
