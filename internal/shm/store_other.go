//go:build !amd64 || race

package shm

import "sync/atomic"

// StoreRelease stores v in *w after every earlier store of the caller.
// Elsewhere, and under the race detector, it is an atomic store.
func StoreRelease(w *atomic.Uint64, v uint64) { w.Store(v) }
