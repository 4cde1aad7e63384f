// Package bad documents its internals; see txn.go and internal/shm.
package bad

import "github.com/offmap/offmap/internal/shm"

// Thing is documented in terms of Thing.ring, which callers cannot see.
type Thing struct {
	// Size is the size, as rollDue computes it.
	Size int
	ring int
}

// Wait spins, yielding as shm.SpinYield does, until helper() returns.
func (t *Thing) Wait() { _ = shm.ErrEmpty }

func helper() bool { return rollDue() }

func rollDue() bool { return false }

// A stands beside b_c.
const A = 1

const b_c = 2
