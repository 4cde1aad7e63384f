package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifySound(t *testing.T) {
	path := newMap(t, 1000, 8, 16)
	if out := ok(t, "verify", path); !strings.Contains(out, "ok: 0 entries") {
		t.Errorf("empty map: %q", out)
	}
	fill(t, path, sampleEntries(700))
	if out := ok(t, "verify", path); !strings.Contains(out, "ok: 700 entries") {
		t.Errorf("full map: %q", out)
	}
}

// soundFile returns a new map file holding sampleEntries(700), and its bytes.
func soundFile(t *testing.T) (string, *rawMap, map[string]string) {
	t.Helper()
	path := newMap(t, 1000, 8, 16)
	keys := sampleEntries(700)
	fill(t, path, keys)
	return path, readRaw(t, path), keys
}

// damage edits a sound file in one precise way and returns the lines
// verify must print about it.
type damage struct {
	name string
	// recoverable: recover repairs it (problems with the header page or the
	// file's size need 'offmap copy').
	recoverable bool
	apply       func(t *testing.T, r *rawMap, seg uint32, keys []string) []string
}

func damages(t *testing.T) []damage {
	token, deadPID := deadToken(t)
	return []damage{
		{"slot points outside the segment", true, func(t *testing.T, r *rawMap, _ uint32, keys []string) []string {
			seg, i, w := r.find(t, keys[0])
			c := uint64(r.chunks + 10)
			r.setSlot(seg, i, w&^0xffffffff|c)
			return []string{fmt.Sprintf("segment %d: slot %d: entry at chunk %d is outside the segment", seg, i, c)}
		}},
		{"key does not hash to its slot", true, func(t *testing.T, r *rawMap, _ uint32, keys []string) []string {
			seg, i, w := r.find(t, keys[0])
			r.b[r.entryOff(seg, slotChunkOf(w))+8] ^= 0x20 // "key-..." becomes "Key-..."
			return []string{fmt.Sprintf("segment %d: slot %d: key at chunk %d does not hash to this slot", seg, i, slotChunkOf(w))}
		}},
		{"two slots reference one entry", true, func(t *testing.T, r *rawMap, _ uint32, keys []string) []string {
			seg, i, w := r.find(t, keys[0])
			r.setSlot(seg, r.emptySlotFrom(seg, i), w)
			return []string{fmt.Sprintf("both reference chunk %d (a delete was interrupted)", slotChunkOf(w))}
		}},
		{"wrong entry count", true, func(t *testing.T, r *rawMap, seg uint32, keys []string) []string {
			n := r.hdr(seg, hdrCount)
			r.setHdr(seg, hdrCount, n+3)
			return []string{fmt.Sprintf("segment %d: entry count says %d, slots hold %d", seg, n+3, n)}
		}},
		{"leaked chunk", true, func(t *testing.T, r *rawMap, seg uint32, keys []string) []string {
			r.setUsed(seg, r.freeRun(t, seg, 1), true)
			return []string{fmt.Sprintf("segment %d: 1 chunks marked used belong to no entry", seg)}
		}},
		{"live entry's chunk marked free", true, func(t *testing.T, r *rawMap, _ uint32, keys []string) []string {
			seg, _, w := r.find(t, keys[0])
			r.setUsed(seg, slotChunkOf(w), false)
			return []string{fmt.Sprintf("segment %d: 1 chunks of live entries are marked free", seg)}
		}},
		{"wrong used chunk count", true, func(t *testing.T, r *rawMap, seg uint32, keys []string) []string {
			n := r.hdr(seg, hdrUsed)
			r.setHdr(seg, hdrUsed, n+1)
			return []string{fmt.Sprintf("segment %d: used chunk count says %d, entries take %d", seg, n+1, n)}
		}},
		{"wrong detached count", true, func(t *testing.T, r *rawMap, seg uint32, keys []string) []string {
			r.setHdr(seg, hdrDetached, 1)
			return []string{fmt.Sprintf("segment %d: detached count says 1, slots hold 0", seg)}
		}},
		{"lock owned by a dead process, version odd", true, func(t *testing.T, r *rawMap, seg uint32, keys []string) []string {
			r.setHdr(seg, hdrOwner, token)
			r.setHdr(seg, hdrVersion, r.hdr(seg, hdrVersion)+1)
			return []string{fmt.Sprintf("segment %d: lock held by dead process %d", seg, deadPID)}
		}},
		{"version odd with the lock free", true, func(t *testing.T, r *rawMap, seg uint32, keys []string) []string {
			r.setHdr(seg, hdrVersion, r.hdr(seg, hdrVersion)+1)
			return []string{fmt.Sprintf("segment %d: version is odd but no process holds the lock", seg)}
		}},
		{"pending redo record", true, func(t *testing.T, r *rawMap, _ uint32, keys []string) []string {
			seg, _, w := r.find(t, keys[0])
			_, v := r.entry(seg, slotChunkOf(w))
			r.setScratch(seg, bytes.ToUpper(v))
			r.setHdr(seg, hdrIntent, uint64(slotChunkOf(w))+1)
			return []string{fmt.Sprintf("segment %d: an in-place value update was interrupted (redo record for chunk %d)", seg, slotChunkOf(w))}
		}},
		{"entry cut off from its home slot", true, func(t *testing.T, r *rawMap, _ uint32, _ []string) []string {
			// A displaced entry: clear a slot between its home and its place.
			for seg := range r.segments {
				for i := range r.slots {
					w := r.slot(seg, i)
					if w == 0 || r.homeOf(w) == i {
						continue
					}
					r.setSlot(seg, r.homeOf(w), 0)
					return []string{fmt.Sprintf("segment %d: slot %d: entry cut off from its home slot %d", seg, i, r.homeOf(w))}
				}
			}
			t.Fatal("no displaced entry in the file")
			return nil
		}},
		{"overlapping entries", true, func(t *testing.T, r *rawMap, _ uint32, _ []string) []string {
			// Entry A directly followed by entry B: lengthen A's value into B.
			for seg := range r.segments {
				starts := make(map[uint32]bool)
				for i := range r.slots {
					if w := r.slot(seg, i); w != 0 {
						starts[slotChunkOf(w)] = true
					}
				}
				for i := range r.slots {
					w := r.slot(seg, i)
					if w == 0 {
						continue
					}
					k, v := r.entry(seg, slotChunkOf(w))
					if !starts[slotChunkOf(w)+r.chunksFor(len(k), len(v))] {
						continue
					}
					le.PutUint32(r.b[r.entryOff(seg, slotChunkOf(w))+4:], uint32(len(v))+r.chunkSize)
					return []string{fmt.Sprintf("segment %d: slot", seg), "overlaps another entry; recover drops the entry"}
				}
			}
			t.Fatal("no adjacent entries in the file")
			return nil
		}},
		{"slot table word outside the file", true, func(t *testing.T, r *rawMap, seg uint32, _ []string) []string {
			r.setHdr(seg, hdrTable, 1<<40|100)
			return []string{fmt.Sprintf("segment %d: its slot table word %#x names no valid table", seg, uint64(1<<40|100))}
		}},
		{"entry over the size limits", true, func(t *testing.T, r *rawMap, _ uint32, keys []string) []string {
			seg, i, w := r.find(t, keys[0])
			le.PutUint32(r.b[r.entryOff(seg, slotChunkOf(w)):], r.maxKey+1)
			return []string{fmt.Sprintf("segment %d: slot %d: entry at chunk %d is outside the segment or over the size limits", seg, i, slotChunkOf(w))}
		}},
		{"reserved header byte set", true, func(t *testing.T, r *rawMap, _ uint32, _ []string) []string {
			r.b[300] = 1
			return []string{"header: reserved byte at offset 300, outside the checksum, is not zero; recover clears it"}
		}},
		{"extent past the claimed space", true, func(t *testing.T, r *rawMap, seg uint32, _ []string) []string {
			r.setHdr(seg, hdrExtent1, uint64(len(r.b)))
			return []string{fmt.Sprintf("segment %d: extent 1 [%d, ", seg, len(r.b)), "lies past the end of the file", "recover drops it"}
		}},
	}
}

// TestVerifyDamage damages a sound file in each way, checks that verify
// reports exactly that, then that recover repairs it.
func TestVerifyDamage(t *testing.T) {
	for _, d := range damages(t) {
		t.Run(strings.ReplaceAll(d.name, " ", "_"), func(t *testing.T) {
			path, r, entries := soundFile(t)
			by := r.keysBySegment(t, entries)
			seg := uint32(0)
			for len(by[seg]) == 0 {
				seg++
			}
			want := d.apply(t, r, seg, by[seg])
			r.write(t)
			before, _ := os.ReadFile(path)

			v := offmapRun(t, nil, "verify", path)
			if v.code != 1 || v.stderr != "" {
				t.Fatalf("verify: want exit 1 and a report, got %s", v)
			}
			for _, w := range want {
				if !strings.Contains(v.stdout, w) {
					t.Errorf("verify did not report %q:\n%s", w, v.stdout)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("verify changed the file")
			}
			if !d.recoverable {
				return
			}
			rec := ok(t, "recover", path)
			if !strings.Contains(rec, "fixed: ") {
				t.Errorf("recover reported nothing:\n%s", rec)
			}
			if out := ok(t, "verify", path); !strings.Contains(out, ": ok:") {
				t.Errorf("verify after recover: %q", out)
			}
		})
	}
}

// TestVerifySeveralDamages damages six segments of one file in six ways:
// each must be reported, and recover must keep every entry that the damage
// did not destroy.
func TestVerifySeveralDamages(t *testing.T) {
	path, r, entries := soundFile(t)
	by := r.keysBySegment(t, entries)
	all := damages(t)
	pick := []string{
		"slot points outside the segment", "key does not hash to its slot", "wrong entry count",
		"leaked chunk", "lock owned by a dead process, version odd", "pending redo record",
	}
	want := make(map[string]string)
	for k, v := range entries {
		want[k] = v
	}
	var reports []string
	seg := uint32(0)
	for _, name := range pick {
		for len(by[seg]) == 0 {
			seg++
		}
		for _, d := range all {
			if d.name != name {
				continue
			}
			reports = append(reports, d.apply(t, r, seg, by[seg])...)
			switch name {
			case "slot points outside the segment", "key does not hash to its slot":
				delete(want, by[seg][0]) // the damage destroyed this entry
			case "pending redo record":
				want[by[seg][0]] = strings.ToUpper(want[by[seg][0]]) // the redo completes the update
			}
		}
		seg++
	}
	r.write(t)
	v := offmapRun(t, nil, "verify", path)
	if v.code != 1 {
		t.Fatalf("verify: want exit 1, got %s", v)
	}
	for _, w := range reports {
		if !strings.Contains(v.stdout, w) {
			t.Errorf("verify did not report %q:\n%s", w, v.stdout)
		}
	}
	if !strings.Contains(v.stdout, fmt.Sprintf("%s: %d problems", path, strings.Count(v.stdout, "\n  "))) {
		t.Errorf("verify's count does not match its lines:\n%s", v.stdout)
	}
	ok(t, "recover", path)
	ok(t, "verify", path)
	sameContents(t, contents(t, path), want)
}

// TestVerifyBadFiles: files that are not sound maps at all get one error
// line and exit 1; a missing file exit 2. None is changed.
func TestVerifyBadFiles(t *testing.T) {
	sound, _, _ := soundFile(t)
	good, err := os.ReadFile(sound)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	resum := func(b []byte) []byte { r := rawMap{b: b}; r.resum(); return b }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "file is empty"},
		{"foreign", []byte("#!/bin/sh\necho this is a shell script\n"), "not a file of this kind: wrong magic number"},
		{"magic only", []byte("OFFMAP\x00\x00"), "truncated"},
		{"truncated in the header", good[:100], "truncated"},
		{"truncated in the segments", good[:len(good)/2], "truncated"},
		{"newer version", edit(func(b []byte) []byte { b[8] = 9; return b }), "unsupported format version"},
		{"header checksum", edit(func(b []byte) []byte { b[40] ^= 1; return b }), "header checksum"},
		{"header geometry", edit(func(b []byte) []byte { le.PutUint32(b[56:], le.Uint32(b[56:])+1); return resum(b) }), "file is corrupt"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.map")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			fails(t, 1, c.want, "verify", path)
			if after, _ := os.ReadFile(path); !bytes.Equal(after, c.data) {
				t.Fatal("verify changed the file")
			}
		})
	}
	dir := t.TempDir()
	fails(t, 2, "no such file", "verify", filepath.Join(dir, "missing.map"))
	fails(t, 2, "is a directory", "verify", dir)
	if _, err := os.Stat(filepath.Join(dir, "missing.map")); err == nil {
		t.Error("verify created the missing file")
	}
}
