package offmap

import (
	"fmt"
	"iter"
)

// Set is a set of keys in a file, shared by every process that opens it,
// as Chronicle's ChronicleSet is: a map whose entries have no value, so
// that an entry takes its header and its key and nothing more. Its
// methods are safe for concurrent use, and crash-safe as the map's are.
type Set struct{ m *Map }

// OpenSet opens the set at path, creating it from opts if it does not
// exist. opts sizes the keys as for a map; AverageValueSize and
// MaxValueSize must be zero. A file made for a map with values is
// ErrOptionsMismatch.
func OpenSet(path string, opts Options) (*Set, error) {
	opts.set = true
	m, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	if m.hdr.MaxValue != 0 {
		m.Close()
		return nil, fmt.Errorf("%w: %s is a map with values up to %d bytes, not a set", ErrOptionsMismatch, path, m.hdr.MaxValue)
	}
	return &Set{m: m}, nil
}

// Add adds key and reports whether it was absent. It returns ErrFull when
// a new key does not fit.
func (s *Set) Add(key []byte) (added bool, err error) { return s.m.PutIfAbsent(key, nil) }

// Has reports whether key is in the set.
func (s *Set) Has(key []byte) (bool, error) { return s.m.Has(key) }

// Remove removes key and reports whether it was there.
func (s *Set) Remove(key []byte) (removed bool, err error) { return s.m.Delete(key) }

// Len returns the number of keys.
func (s *Set) Len() int { return s.m.Len() }

// All yields every key, as Map.All does (each slice valid only until the
// next step); like it, it stops silently on damage or Close.
func (s *Set) All() iter.Seq[[]byte] {
	var err error
	return s.AllErr(&err)
}

// AllErr is All that sets *err to why the iteration stopped early, or to
// nil, as Map.AllErr does.
func (s *Set) AllErr(err *error) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for k := range s.m.AllErr(err) {
			if !yield(k) {
				return
			}
		}
	}
}

// Map returns the map under the set, for Stats, Check, Recover and Sync.
func (s *Set) Map() *Map { return s.m }

// Close closes the set.
func (s *Set) Close() error { return s.m.Close() }
