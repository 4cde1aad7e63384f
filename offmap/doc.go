// Package offmap is a hash map in a memory-mapped file, shared by every
// goroutine and process on the machine that opens the file, in the spirit
// of Chronicle Map.
//
// A map starts at the size it is created for (Options.Entries and the
// average key and value sizes; the zero Options make a small map) and
// grows online as it fills, up to Options.MaxFileSize. It lives in one file: a header, then segments, each
// with its own lock word, hash slots and entry space; a segment that fills
// moves to a larger slot table or adds entry space at the end of the file,
// under its own lock, while every process goes on. Reads take no lock:
// a segment's version word makes them retry while a writer changes it
// (a seqlock). Writes lock one segment; a process killed holding the lock
// is known dead by the lock it held on a byte of the file, which the
// kernel drops when it dies (in any pid namespace, as any uid), and the
// next writer takes the lock over and finishes or rolls back the change it left (every change
// is logged in the segment before it is made). So a kill -9 at any
// instant leaves the file usable by the others, and nothing completed
// before it is lost.
//
//	m, err := offmap.Open("clients.map", offmap.Options{Entries: 100_000, AverageKeySize: 16, AverageValueSize: 64})
//	err = m.Put(key, value)
//	v, err := m.Get(key)
//	hits, err := m.AcquireInt64([]byte("hits")) // an atomic counter in the file
//	hits.Add(1)
//
// Values can be used in place: AcquireInt64 and the other Acquire methods
// return handles (package values) whose atomic operations act on the
// mapped bytes, seen by every process at once, with no copy and no Put.
//
// A map at MaxFileSize, or on a full disk, returns ErrFull and changes
// nothing; damaged, truncated,
// foreign or newer files are errors at Open, never a crash. Check verifies
// a map and Recover repairs one while other processes use it. The file
// format is in docs/FORMAT.md.
package offmap
