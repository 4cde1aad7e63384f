package eda

import "encoding/binary"

// A message is 20 bytes, little-endian:
//
//	off size field
//	  0    8 scheduled send time, CLOCK_MONOTONIC ns (latency.Nanotime)
//	  8    8 actual send time, same clock
//	 16    4 int32 that each service increments
const messageSize = 20

type message struct {
	scheduled int64
	sent      int64
	value     int32
}

func (m message) encode(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b[:0], uint64(m.scheduled))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.sent))
	return binary.LittleEndian.AppendUint32(b, uint32(m.value))
}

func decode(b []byte) (message, bool) {
	if len(b) != messageSize {
		return message{}, false
	}
	return message{
		scheduled: int64(binary.LittleEndian.Uint64(b)),
		sent:      int64(binary.LittleEndian.Uint64(b[8:])),
		value:     int32(binary.LittleEndian.Uint32(b[16:])),
	}, true
}
