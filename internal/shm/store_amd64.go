//go:build amd64 && !race

package shm

import "sync/atomic"

// StoreRelease stores v in *w after every earlier store of the caller:
// a release store, which is what publishing a written record needs. On
// amd64 (total store order) that is a plain move, some 4 ns cheaper than
// the locked exchange that (*atomic.Uint64).Store compiles to. Readers
// must still load *w atomically.
//
//go:noescape
func StoreRelease(w *atomic.Uint64, v uint64)
