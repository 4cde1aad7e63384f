package offmap

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/offmap/offmap/internal/shm"
)

// TestReadOnlyReadAfterWriterFinished: a read-only reader that waits out
// a live writer must not take the free lock it sees just after that
// writer finished for a dead writer's, and read the segment unchecked:
// another change may have begun meanwhile. Here it has, and left the
// value half written; Get, Range and ViewKeys must each return the value
// as the change leaves it when done, never the torn one.
func TestReadOnlyReadAfterWriterFinished(t *testing.T) {
	key, old := []byte("the-key"), []byte("aaaaaaaabbbbbbbb")
	for _, c := range []struct {
		name string
		read func(ro *Map) ([]byte, error)
	}{
		{"Get", func(ro *Map) ([]byte, error) { return ro.Get(key) }},
		{"Range", func(ro *Map) ([]byte, error) {
			var got []byte
			err := ro.Range(func(k, v []byte) bool {
				if bytes.Equal(k, key) {
					got = append([]byte(nil), v...)
				}
				return true
			})
			return got, err
		}},
		{"ViewKeys", func(ro *Map) ([]byte, error) {
			var got []byte
			err := ro.ViewKeys([][]byte{key}, func(v [][]byte, _ []bool) { got = append([]byte(nil), v[0]...) })
			return got, err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := tempPath(t)
			w, err := Open(p, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 16, Segments: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer closeChecked(t, w)
			mustPut(t, w, key, old)
			ro, err := Open(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			s := w.segmentOf(key)
			_, _, e, found, _ := w.find(s, key, w.hash(key))
			if !found {
				t.Fatal("key not found")
			}
			word := shm.U64(s.mem, e.valOff())
			// The first change, which the reader waits out.
			if err := w.lock(s); err != nil {
				t.Fatal(err)
			}
			beginChange(s)
			var finish sync.Once
			done := func() { // the second change ends, its value as it was
				finish.Do(func() {
					word.Store(binary.LittleEndian.Uint64(old))
					endChange(s)
					s.hdr.lock.Unlock()
				})
			}
			defer done()
			waits, looks := staleWaits.Load(), 0
			readStepLooks = func(phase int) {
				if looks++; looks > 2 {
					return
				}
				if phase == 0 { // the first change ends ...
					endChange(s)
					s.hdr.lock.Unlock()
					return
				}
				// ... and, after the reader saw the lock free, a second
				// begins and writes half the value.
				if err := w.lock(s); err != nil {
					t.Error(err)
					return
				}
				beginChange(s)
				word.Store(binary.LittleEndian.Uint64([]byte("xxxxxxxx")))
				go func() { // ends once the reader waits for it
					for staleWaits.Load() == waits {
						shm.Yield()
					}
					done()
				}()
			}
			defer func() { readStepLooks = nil }()
			got, err := c.read(ro)
			if looks < 2 {
				t.Fatalf("the reader never looked at the lock's holder (%d looks)", looks)
			}
			if err != nil || !bytes.Equal(got, old) {
				t.Fatalf("read %q, %v; want %q", got, err, old)
			}
		})
	}
}
