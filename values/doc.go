// Package values gives direct handles onto values that live in shared
// memory, such as an offmap entry: an Int64 that any process adds to in
// place, with one atomic instruction, no copy, no allocation and no re-put
// (the idea of Chronicle Map's LongValue).
//
// A handle is a small value (a pointer and a guard); copy it freely. Its
// methods are safe for concurrent use by any number of goroutines and
// processes. A handle used after the memory it points into was closed
// panics with a message that says so, instead of faulting.
//
// Codec stores a pointer-free, padding-free struct as one copy of its
// memory (little-endian), for map values and queue messages read and
// written without reflection; its constructor rejects types whose layout
// could differ between processes or platforms.
package values
