package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sumMessages are the payloads the checksum tests append: empty, shorter
// and longer than a word, and spanning pages.
var sumMessages = [][]byte{{}, []byte("a"), []byte("seven b"), []byte("eight by"), bytes.Repeat([]byte("x"), 100), bytes.Repeat([]byte("long "), 2000)}

type point struct{ X, Y int64 }

type binText string

func (b binText) AppendBinary(dst []byte) ([]byte, error) { return append(dst, b...), nil }

func (b *binText) UnmarshalBinary(p []byte) error { *b = binText(p); return nil }

// TestChecksumMessagesReadBack: every way to read a checksummed queue
// returns exactly what was appended, the choice lasts for the queue's
// life, and conflicting options are refused.
func TestChecksumMessagesReadBack(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{ChecksumMessages: true, IndexSpacing: 2})
	for _, m := range sumMessages {
		if _, err := q.Append(m); err != nil {
			t.Fatal(err)
		}
	}
	w, err := q.Reserve(5)
	if err != nil {
		t.Fatal(err)
	}
	copy(w.Bytes(), "resvd")
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	want := append(append([][]byte{}, sumMessages...), []byte("resvd"))
	if st, err := q.Stats(); err != nil || !st.ChecksumMessages || st.FormatVersion != flagsVersion {
		t.Fatalf("Stats: checksums %v, version %d, %v", st.ChecksumMessages, st.FormatVersion, err)
	}

	tl := tailerT(t, q)
	for i, m := range want {
		_, got, err := tl.Next()
		if err != nil || !bytes.Equal(got, m) {
			t.Fatalf("Next %d: %q, %v; want %q", i, got, err, m)
		}
	}
	tl.SeekStart()
	buf := make([]byte, 1<<14)
	for i, m := range want {
		if len(m) > 0 {
			if n, _, err := tl.ReadInto(buf[:0]); err != io.ErrShortBuffer || n != len(m) {
				t.Fatalf("ReadInto %d into no room: %d, %v; want %d, ErrShortBuffer", i, n, err, len(m))
			}
		}
		n, _, err := tl.ReadInto(buf)
		if err != nil || !bytes.Equal(buf[:n], m) {
			t.Fatalf("ReadInto %d: %q, %v", i, buf[:n], err)
		}
	}
	for i := len(want) - 1; i >= 0; i-- {
		_, got, err := tl.Prev()
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("Prev %d: %q, %v", i, got, err)
		}
	}

	// Typed messages.
	tq := openT(t, t.TempDir(), Options{ChecksumMessages: true})
	ap, _ := NewAppender[point](tq)
	if _, err := ap.Append(&point{3, -4}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := AppendBinary(tq, binText("binary"), nil); err != nil {
		t.Fatal(err)
	}
	ttl := tailerT(t, tq)
	rd, _ := NewReader[point](ttl)
	var p point
	if _, err := rd.Next(&p); err != nil || p != (point{3, -4}) {
		t.Fatalf("Reader.Next: %+v, %v", p, err)
	}
	var b binText
	if _, err := NextBinary(ttl, &b); err != nil || b != "binary" {
		t.Fatalf("NextBinary: %q, %v", b, err)
	}

	// The queue's choice lasts: zero options take it, and asking for
	// checksums on a queue without them is refused.
	q2 := openT(t, dir, Options{})
	if !q2.checksums {
		t.Error("a reopen with zero options lost the checksums")
	}
	plain := t.TempDir()
	openT(t, plain, Options{}).Append([]byte("x"))
	if _, err := Open(plain, Options{ChecksumMessages: true}); !errors.Is(err, ErrOptionsMismatch) {
		t.Errorf("ChecksumMessages on a queue without: %v, want ErrOptionsMismatch", err)
	}
	if v := binary.LittleEndian.Uint32(readFile(t, filepath.Join(plain, metaName))[8:]); v != formatVersion {
		t.Errorf("a queue without flags has version %d, want %d (readable by builds of version %d)", v, formatVersion, formatVersion)
	}
	if _, err := q.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestChecksumCatchesDamage damages each message of a checksummed queue
// in turn (a payload byte, its stored checksum): a tailer reads every
// message before it, then gets ErrCorrupt naming the message and stays
// there; Check names it too. Without checksums the same damage reads
// back as other bytes.
func TestChecksumCatchesDamage(t *testing.T) {
	for _, sums := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksums %v", sums), func(t *testing.T) {
			dir := t.TempDir()
			q := openT(t, dir, Options{ChecksumMessages: sums})
			var idxs []uint64
			for _, m := range sumMessages {
				idx, err := q.Append(m)
				if err != nil {
					t.Fatal(err)
				}
				idxs = append(idxs, idx)
			}
			c := q.wcur.Load()
			var offs []int64 // each message's slot
			for w := c.walkFrom(0, dataStart); len(offs) < len(sumMessages); {
				h, err := w.header()
				if err != nil {
					t.Fatal(err)
				}
				if h&flagMeta == 0 {
					offs = append(offs, w.off)
				}
				w.step(h)
			}
			path := q.cyclePath(c.num)
			closeChecked(t, q)
			pristine := readFile(t, path)
			for i, off := range offs {
				if len(sumMessages[i]) == 0 && !sums {
					continue // no byte to damage
				}
				for _, what := range []string{"payload", "checksum"} {
					if what == "checksum" && !sums {
						continue
					}
					damaged := bytes.Clone(pristine)
					at := off + 8 + int64(len(sumMessages[i])) - 1 // the last byte appended
					if sums {
						at += sumSize
					}
					if what == "checksum" || len(sumMessages[i]) == 0 {
						at = off + 8
					}
					damaged[at] ^= 0x20
					if err := os.WriteFile(path, damaged, 0o600); err != nil {
						t.Fatal(err)
					}
					r, err := Open(dir, Options{ReadOnly: true})
					if err != nil {
						t.Fatal(err)
					}
					tl, _ := r.Tailer()
					for j := 0; j < i; j++ {
						if _, m, err := tl.Next(); err != nil || !bytes.Equal(m, sumMessages[j]) {
							t.Fatalf("message %d before the damage: %q, %v", j, m, err)
						}
					}
					_, m, err := tl.Next()
					if !sums {
						if err != nil || bytes.Equal(m, sumMessages[i]) {
							t.Errorf("without checksums, damaged message %d: %q, %v; want other bytes and no error", i, m, err)
						}
						r.Close()
						continue
					}
					name := fmt.Sprintf("message %d:%d", idxs[i]>>32, uint32(idxs[i]))
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) || m != nil {
						t.Errorf("%s of message %d damaged: Next = %q, %v; want ErrCorrupt naming %s", what, i, m, err, name)
					}
					if _, _, err2 := tl.Next(); err2 == nil || err2.Error() != err.Error() || tl.Index() != idxs[i] {
						t.Errorf("%s of message %d damaged: the tailer moved on (%v, at %#x)", what, i, err2, tl.Index())
					}
					if _, err := r.Check(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
						t.Errorf("%s of message %d damaged: Check = %v", what, i, err)
					}
					// Seeking past it reads on.
					if i+1 < len(idxs) {
						if err := tl.Seek(idxs[i+1]); err != nil {
							t.Fatal(err)
						}
						if _, m, err := tl.Next(); err != nil || !bytes.Equal(m, sumMessages[i+1]) {
							t.Errorf("after Seek past the damage: %q, %v", m, err)
						}
					}
					r.Close()
				}
			}
		})
	}
}

// TestChecksumFlagsInMeta: queue.meta's flags word and version agree, and
// a flag this build does not know is ErrVersion, as from a later build.
func TestChecksumFlagsInMeta(t *testing.T) {
	h := Options{ChecksumMessages: true}.newMeta(newClock().Now())
	h.MaxCycleSize, h.IndexSpacing = defaultMaxCycleSize, defaultSpacing
	for _, tc := range []struct {
		version, flags uint32
		want           error
	}{
		{flagsVersion, flagChecksums, nil},
		{formatVersion, 0, nil},
		{flagsVersion, 0, ErrCorrupt},
		{formatVersion, flagChecksums, ErrCorrupt},
		{flagsVersion, flagChecksums | 1<<7, ErrVersion},
	} {
		h.Version, h.Flags = tc.version, tc.flags
		b := h.encode()
		got, err := decodeMeta(b, int64(len(b)))
		if tc.want == nil && (err != nil || got.Flags != tc.flags) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("version %d flags %#x: %v, want %v", tc.version, tc.flags, err, tc.want)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
