package shm

// prefetch asks the CPU to bring the cache line at p (and its page
// translation) closer, without waiting for it. Unlike a load it never
// faults, whatever p is.
//
//go:noescape
func prefetch(p uintptr)

// prefetchWrite is prefetch for a line about to be written: the line
// arrives owned by this core, so the write needs no second trip.
//
//go:noescape
func prefetchWrite(p uintptr)
