package values_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/values"
)

// Quote is trivially copyable: fixed-size fields, no pointers, no
// padding, so its memory image is its stored form.
type Quote struct {
	Bid, Ask  int64 // price in 1e-4 units
	BidSize   uint32
	AskSize   uint32
	Timestamp int64 // Unix nanoseconds
}

var quoteCodec = values.MustCodec[Quote]()

// A struct stored in a map and read back with one copy of its memory each
// way, no reflection and no allocation.
func ExampleCodec() {
	dir, err := os.MkdirTemp("", "quotes")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	m, err := offmap.Open(filepath.Join(dir, "quotes.map"), offmap.Options{
		Entries: 1000, AverageKeySize: 8, AverageValueSize: quoteCodec.Size(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	q := Quote{Bid: 1_234_500, Ask: 1_234_700, BidSize: 300, AskSize: 100}
	if err := m.Put([]byte("EURUSD"), quoteCodec.View(&q)); err != nil { // View: the struct's own bytes
		log.Fatal(err)
	}

	var got Quote
	buf := make([]byte, 0, quoteCodec.Size())
	if buf, err = m.AppendValue(buf, []byte("EURUSD")); err != nil {
		log.Fatal(err)
	}
	if err := quoteCodec.Decode(buf, &got); err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Bid, got.Ask, got.BidSize, got.AskSize)
	fmt.Println(quoteCodec.Size(), "bytes")

	// A type the codec cannot store as its memory image is refused with the
	// reason.
	type withString struct{ Name string }
	_, err = values.NewCodec[withString]()
	fmt.Println(err != nil)
	// Output:
	// 1234500 1234700 300 100
	// 32 bytes
	// true
}
