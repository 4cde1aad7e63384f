package main

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzDumpFormat: any key and value, written in each form, read back as
// the same bytes. (The end-to-end round trip is TestDumpLoadRoundTrip.)
func FuzzDumpFormat(f *testing.F) {
	for k, v := range special {
		f.Add([]byte(k), []byte(v))
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		for _, form := range []dumpWriter{{}, {hex: true}, {json: true}, {json: true, hex: true}} {
			var buf bytes.Buffer
			w := form
			w.w = bufio.NewWriter(&buf)
			if err := w.header(layout{entries: 1, avgKey: 1, avgValue: 1, maxKey: 1, maxValue: 1, segments: 1}); err != nil {
				t.Fatal(err)
			}
			if err := w.write(key, value); err != nil {
				t.Fatal(err)
			}
			w.w.Flush()
			if bytes.Count(buf.Bytes(), []byte("\n")) != 1+btoi(!form.json) {
				t.Fatalf("%+v: not one line per entry: %q", form, buf.String())
			}
			r := newDumpReader(&buf)
			k, v, err := r.next()
			if err != nil {
				t.Fatalf("%+v: %q: %v", form, buf.String(), err)
			}
			if !bytes.Equal(k, key) || !bytes.Equal(v, value) {
				t.Fatalf("%+v: wrote %q %q, read %q %q", form, key, value, k, v)
			}
			if r.hasLayout == form.json {
				t.Fatalf("%+v: layout line read: %v", form, r.hasLayout)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
