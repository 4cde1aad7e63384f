package ingest

import (
	"bytes"
	"errors"
	"testing"
)

func TestSplit(t *testing.T) {
	msg := make([]byte, FrameSize+5)
	putFrame(msg, Frame{Seq: 1<<40 + 7, Source: 0xdeadbeef})
	copy(msg[FrameSize:], "hello")
	f, p, err := Split(msg)
	if err != nil || f.Seq != 1<<40+7 || f.Source != 0xdeadbeef || string(p) != "hello" {
		t.Fatalf("Split = %+v, %q, %v", f, p, err)
	}
	if f, p, err := Split(msg[:FrameSize]); err != nil || f.Seq != 1<<40+7 || len(p) != 0 {
		t.Fatalf("empty payload: %+v, %q, %v", f, p, err)
	}
	for name, bad := range map[string][]byte{
		"empty":   nil,
		"short":   msg[:FrameSize-1],
		"foreign": []byte("a message some other program appended"),
		"version": append([]byte("OFI\x02"), msg[4:]...),
	} {
		if _, _, err := Split(bad); !errors.Is(err, ErrNoFrame) {
			t.Errorf("%s: Split error %v, want ErrNoFrame", name, err)
		}
	}
}

func TestSourceTag(t *testing.T) {
	a, b := SourceTag(jetStreamName("ORDERS")), SourceTag(kafkaName("ORDERS", 0))
	if a == b || SourceTag(kafkaName("t", 0)) == SourceTag(kafkaName("t", 1)) {
		t.Fatal("different sources, one tag")
	}
	if a != SourceTag("jetstream:ORDERS") {
		t.Fatal("the tag of a name changed: queues written before could not be resumed")
	}
}

// FuzzSplit: any bytes give a frame and a payload, or ErrNoFrame; never a
// panic, and a payload is always the tail of the message.
func FuzzSplit(f *testing.F) {
	msg := make([]byte, FrameSize+3)
	putFrame(msg, Frame{Seq: 9, Source: 1})
	f.Add(msg)
	f.Add([]byte("OFI"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, p, err := Split(b)
		if err != nil {
			if !errors.Is(err, ErrNoFrame) {
				t.Fatalf("error %v is not ErrNoFrame", err)
			}
			return
		}
		if !bytes.Equal(p, b[FrameSize:]) {
			t.Fatal("payload is not the message's tail")
		}
		again := make([]byte, FrameSize)
		putFrame(again, fr)
		if !bytes.Equal(again, b[:FrameSize]) {
			t.Fatal("frame does not round-trip")
		}
	})
}
