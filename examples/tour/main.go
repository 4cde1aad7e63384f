// Command tour runs the tour of the map in docs/MAP.md: go run ./examples/tour.
package main

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/values"
)

// MarketData is trivially copyable: fixed-size fields, no pointers, no
// padding. Its memory image is its stored form.
type MarketData struct {
	Bid, Ask int64
	Time     int64
}

func main() {
	dir, err := os.MkdirTemp("", "tour")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := tour(filepath.Join(dir, "clients.map")); err != nil {
		log.Fatal(err)
	}
}

// tour is the tour of docs/MAP.md; tour_test.go checks that the two agree.
func tour(path string) error {
	// tour:begin
	m, err := offmap.Open(path, offmap.Options{
		Entries:          100_000, // where it starts: it grows as it fills
		AverageKeySize:   16,
		AverageValueSize: 8,
	})
	if err != nil {
		return err
	}
	defer m.Close()

	key := []byte("user1")
	if err := m.Put(key, []byte("hello")); err != nil { // insert or replace
		return err
	}
	v, err := m.Get(key) // a copy; ErrNotFound if absent
	if err != nil {
		return err
	}
	buf := make([]byte, 0, 64)
	if buf, err = m.AppendValue(buf[:0], key); err != nil { // no allocation with a reused buffer
		return err
	}
	err = m.Update(key, func(v []byte, found bool) ([]byte, offmap.Op) { // atomic read-modify-write
		return append(v, '!'), offmap.OpPut
	})
	if err != nil {
		return err
	}
	swapped, err := m.CompareAndSwap(key, []byte("hello!"), []byte("hi")) // also PutIfAbsent, Replace, CompareAndDelete
	if err != nil || !swapped {
		return fmt.Errorf("CompareAndSwap: %v, %v", swapped, err)
	}
	for k, v := range m.AllErr(&err) { // or m.All(), which does not say why it stopped short, or m.Range
		fmt.Printf("%s=%s\n", k, v)
	}
	if err != nil { // a damaged segment (ErrCorrupt), or the map closed
		return err
	}
	if _, err := m.Delete(key); err != nil {
		return err
	}
	if _, err := m.Get(key); !errors.Is(err, offmap.ErrNotFound) {
		return fmt.Errorf("deleted key: %v", err)
	}

	hits, err := m.AcquireInt64([]byte("user1-hits")) // a handle into the mapped value
	if err != nil {
		return err
	}
	hits.Add(1) // one atomic add, seen by every process, persisted

	codec := values.MustCodec[MarketData]() // a pointer-free, padding-free struct
	md := MarketData{Bid: 101, Ask: 102}
	if err := m.Put([]byte("EURUSD"), codec.View(&md)); err != nil { // stored with one copy of its memory
		return err
	}
	if _, err := m.AppendValue(codec.View(&md)[:0], []byte("EURUSD")); err != nil { // and read back with one
		return err
	}

	if err := m.Sync(); err != nil { // msync: durable against power loss
		return err
	}
	st := m.Stats() // starting room, entries, bytes used, per-segment fill and locks

	if err := m.Check(); err != nil { // full consistency check
		return err
	}
	if _, err := m.Recover(); err != nil { // repair, safe while other processes use the map
		return err
	}
	fmt.Println(string(v), string(buf), hits.Load(), md.Ask, st.Len)
	// tour:end
	return nil
}
