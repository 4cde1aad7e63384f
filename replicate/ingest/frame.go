package ingest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
)

// The frame is what ingest puts before each payload it appends, so that
// the local queue itself records how far it got: the engine's sequence
// (JetStream) or offset (Kafka) of every message, read back from the last
// message on start. Layout, little-endian like the queue's own words:
//
//	off size
//	  0    3  magic "OFI"
//	  3    1  frame version (1)
//	  4    4  source tag: CRC-32C of the source's name (SourceTag)
//	  8    8  engine sequence or offset
//	 16    -  the engine message's payload, unchanged
//
// FrameSize is a multiple of 8, so a payload keeps the 8-byte alignment
// the queue gives every message: a fixed-layout record can still be read
// in place (values.Codec) after Split.
const FrameSize = 16

const (
	frameMagic   = "OFI"
	frameVersion = 1
)

// Frame is the part of a message that ingest adds.
type Frame struct {
	// Seq is the JetStream stream sequence or the Kafka offset of the
	// message.
	Seq uint64
	// Source is the tag of the stream or partition the message came from
	// (SourceTag of its name); a queue holds one source's messages.
	Source uint32
}

// Split separates a message that ingest appended into its frame and the
// engine's payload (a view into msg, not a copy). A message without the
// frame (written to the queue by something else, or damaged) gives an
// error wrapping ErrNoFrame; it never panics.
func Split(msg []byte) (Frame, []byte, error) {
	if len(msg) < FrameSize {
		return Frame{}, nil, fmt.Errorf("%w: %d bytes, shorter than a frame", ErrNoFrame, len(msg))
	}
	if string(msg[:3]) != frameMagic {
		return Frame{}, nil, fmt.Errorf("%w: starts with %q", ErrNoFrame, msg[:3])
	}
	if msg[3] != frameVersion {
		return Frame{}, nil, fmt.Errorf("%w: frame version %d, this code reads %d", ErrNoFrame, msg[3], frameVersion)
	}
	f := Frame{
		Source: binary.LittleEndian.Uint32(msg[4:8]),
		Seq:    binary.LittleEndian.Uint64(msg[8:16]),
	}
	return f, msg[FrameSize:], nil
}

// putFrame writes f's frame into the first FrameSize bytes of dst.
func putFrame(dst []byte, f Frame) {
	copy(dst, frameMagic)
	dst[3] = frameVersion
	binary.LittleEndian.PutUint32(dst[4:8], f.Source)
	binary.LittleEndian.PutUint64(dst[8:16], f.Seq)
}

// SourceTag is the tag that frames carry for the source named name, as
// Progress.Source names it ("jetstream:STREAM", "kafka:TOPIC/PARTITION"):
// a CRC-32C. It exists to catch a queue pointed at another
// stream or partition than the one it was filled from, which would
// otherwise resume at a sequence that means nothing there; it is not a
// security measure.
func SourceTag(name string) uint32 {
	return crc32.Checksum([]byte(name), crc32.MakeTable(crc32.Castagnoli))
}

// jetStreamName and kafkaName are the names the tags are computed from.
func jetStreamName(stream string) string { return "jetstream:" + stream }

func kafkaName(topic string, partition int32) string {
	return "kafka:" + topic + "/" + strconv.Itoa(int(partition))
}
