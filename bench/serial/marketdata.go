// Package serial reproduces the benchmark of the Chronicle serialization
// article (docs/BENCHMARKS.md, Serialization, gives its title) in Go: the same
// MarketData record (two int64s and sixteen float64s, 144 bytes) written to
// and read from a byte buffer three ways, benchmarked in serial_test.go:
//
//   - reflection: encoding/binary's Encode and Decode, which walk the
//     struct with reflect on every call (the article's "default");
//   - explicit: hand-written field-by-field code (WriteExplicit,
//     ReadExplicit), fast but to be kept in step with the struct;
//   - trivially copyable: values.Codec, one memory copy of the whole
//     struct, checked once at construction.
//
// All three produce the same bytes (fields in order, little-endian), so
// they are interchangeable on the wire; only the cost differs. Results are
// in docs/BENCHMARKS.md, section "Serialization".
package serial

import (
	"encoding/binary"
	"math"
)

// MarketData is the article's DTO: a security id, a time, and four levels
// of bid and ask quantities and prices.
type MarketData struct {
	SecurityID int64
	Time       int64

	BidQty0, BidQty1, BidQty2, BidQty3 float64
	AskQty0, AskQty1, AskQty2, AskQty3 float64

	BidPrice0, BidPrice1, BidPrice2, BidPrice3 float64
	AskPrice0, AskPrice1, AskPrice2, AskPrice3 float64
}

// Size is the encoded length of a MarketData in every format here.
const Size = 144

// WriteExplicit writes m into b[:Size], field by field, little-endian.
func WriteExplicit(b []byte, m *MarketData) {
	b = b[:Size] // one bounds check for all the stores below
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(m.SecurityID))
	le.PutUint64(b[8:], uint64(m.Time))
	le.PutUint64(b[16:], math.Float64bits(m.BidQty0))
	le.PutUint64(b[24:], math.Float64bits(m.BidQty1))
	le.PutUint64(b[32:], math.Float64bits(m.BidQty2))
	le.PutUint64(b[40:], math.Float64bits(m.BidQty3))
	le.PutUint64(b[48:], math.Float64bits(m.AskQty0))
	le.PutUint64(b[56:], math.Float64bits(m.AskQty1))
	le.PutUint64(b[64:], math.Float64bits(m.AskQty2))
	le.PutUint64(b[72:], math.Float64bits(m.AskQty3))
	le.PutUint64(b[80:], math.Float64bits(m.BidPrice0))
	le.PutUint64(b[88:], math.Float64bits(m.BidPrice1))
	le.PutUint64(b[96:], math.Float64bits(m.BidPrice2))
	le.PutUint64(b[104:], math.Float64bits(m.BidPrice3))
	le.PutUint64(b[112:], math.Float64bits(m.AskPrice0))
	le.PutUint64(b[120:], math.Float64bits(m.AskPrice1))
	le.PutUint64(b[128:], math.Float64bits(m.AskPrice2))
	le.PutUint64(b[136:], math.Float64bits(m.AskPrice3))
}

// ReadExplicit reads m from b[:Size], field by field, little-endian.
func ReadExplicit(b []byte, m *MarketData) {
	b = b[:Size]
	le := binary.LittleEndian
	m.SecurityID = int64(le.Uint64(b[0:]))
	m.Time = int64(le.Uint64(b[8:]))
	m.BidQty0 = math.Float64frombits(le.Uint64(b[16:]))
	m.BidQty1 = math.Float64frombits(le.Uint64(b[24:]))
	m.BidQty2 = math.Float64frombits(le.Uint64(b[32:]))
	m.BidQty3 = math.Float64frombits(le.Uint64(b[40:]))
	m.AskQty0 = math.Float64frombits(le.Uint64(b[48:]))
	m.AskQty1 = math.Float64frombits(le.Uint64(b[56:]))
	m.AskQty2 = math.Float64frombits(le.Uint64(b[64:]))
	m.AskQty3 = math.Float64frombits(le.Uint64(b[72:]))
	m.BidPrice0 = math.Float64frombits(le.Uint64(b[80:]))
	m.BidPrice1 = math.Float64frombits(le.Uint64(b[88:]))
	m.BidPrice2 = math.Float64frombits(le.Uint64(b[96:]))
	m.BidPrice3 = math.Float64frombits(le.Uint64(b[104:]))
	m.AskPrice0 = math.Float64frombits(le.Uint64(b[112:]))
	m.AskPrice1 = math.Float64frombits(le.Uint64(b[120:]))
	m.AskPrice2 = math.Float64frombits(le.Uint64(b[128:]))
	m.AskPrice3 = math.Float64frombits(le.Uint64(b[136:]))
}

// Sample returns a MarketData with every field set to a distinct value.
func Sample() MarketData {
	return MarketData{
		SecurityID: 123456789, Time: 1_700_000_000_000_000_000,
		BidQty0: 100, BidQty1: 200, BidQty2: 300, BidQty3: 400,
		AskQty0: 150, AskQty1: 250, AskQty2: 350, AskQty3: 450,
		BidPrice0: 99.75, BidPrice1: 99.5, BidPrice2: 99.25, BidPrice3: 99,
		AskPrice0: 100.25, AskPrice1: 100.5, AskPrice2: 100.75, AskPrice3: 101,
	}
}
