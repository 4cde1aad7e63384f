package offmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/offmap/offmap/internal/shm"
)

var tinyOptions = Options{Entries: 12, AverageKeySize: 4, AverageValueSize: 8, MaxKeySize: 16, MaxValueSize: 40, LockTimeout: -1}

// tinyImage returns the bytes of a small map with a few entries of
// several kinds (short, long, pinned, detached).
func tinyImage(t testing.TB) []byte { return mapImage(t, false) }

// grownImage is tinyImage after the map grew: grown slot tables and
// extents, with some of the entries that made it grow still there.
func grownImage(t testing.TB) []byte { return mapImage(t, true) }

func mapImage(t testing.TB, grown bool) []byte {
	t.Helper()
	p := tempPath(t)
	m, err := Open(p, tinyOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		mustPut(t, m, []byte{'k', byte(i)}, bytes.Repeat([]byte{byte(i)}, i*7))
	}
	h, _ := m.AcquireInt64([]byte("pin"))
	h.Add(3)
	m.AcquireInt64([]byte("gone"))
	m.Delete([]byte("gone"))
	if grown {
		for i := range 300 {
			mustPut(t, m, []byte{'g', byte(i), byte(i >> 8)}, bytes.Repeat([]byte{byte(i)}, 8+i%33))
		}
		for i := range 300 {
			if i%10 != 0 {
				m.Delete([]byte{'g', byte(i), byte(i >> 8)})
			}
		}
		if st := m.Stats(); st.TablesGrown == 0 || st.ExtentsAdded == 0 {
			t.Fatalf("the map did not grow: %+v", st)
		}
	}
	m.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// evictImage is a small map that evicts, full, after evictions: its
// FIFOs and ghosts in use, a pinned entry among the others.
func evictImage(t testing.TB) []byte {
	t.Helper()
	p := tempPath(t)
	opts := tinyOptions
	opts.Evict = true
	m, err := Open(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := m.AcquireInt64([]byte("pin"))
	h.Add(3)
	for i := range 60 {
		mustPut(t, m, []byte{'k', byte(i)}, bytes.Repeat([]byte{byte(i)}, i%40))
		m.Get([]byte{'k', byte(i / 2)})
	}
	if st := m.Stats(); st.Evictions == 0 {
		t.Fatalf("nothing evicted: %+v", st)
	}
	m.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pendingTxImage is tinyImage with an UpdateKeys over three segments
// interrupted after it committed: transaction records and words pending,
// locks held by a dead process.
func pendingTxImage(t testing.TB) []byte {
	t.Helper()
	p := tempPath(t)
	opts := tinyOptions
	opts.Segments = 4
	m, err := Open(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	segs := map[uint32]bool{}
	for i := 0; len(keys) < 3 && i < 256; i++ {
		k := []byte{'t', byte(i)}
		if !segs[m.hash(k).seg] {
			segs[m.hash(k).seg] = true
			keys = append(keys, k)
			mustPut(t, m, k, []byte("before"))
		}
	}
	if !runUntilCrash("tx.change", 2, func() {
		m.UpdateKeys(keys, func([][]byte, []bool) ([][]byte, []Op) {
			return [][]byte{[]byte("after-1"), nil, []byte("after-three")}, []Op{OpPut, OpDelete, OpPut}
		})
	}) {
		t.Fatal("the transaction's second change was not reached")
	}
	for _, k := range keys {
		m.abandon(k)
	}
	m.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exercise runs every read and write on a map opened from arbitrary bytes;
// none may panic. Errors are fine.
func exercise(m *Map) {
	var tx [][]byte // pendingTxImage's keys: a read-only reader reads them through the records
	for i := range 8 {
		k := []byte{'k', byte(i)}
		m.Get(k)
		m.Has(k)
		tx = append(tx, []byte{'t', byte(i)})
		m.Get(tx[i])
	}
	m.ViewKeys(tx, func([][]byte, []bool) {})
	m.GetMany(tx, func(int, []byte, bool) {})
	m.Range(func(k, v []byte) bool { return true })
	m.Stats()
	m.Check()
	if m.readOnly {
		return
	}
	m.Put([]byte{'k', 1}, []byte("new value, longer"))
	m.Put([]byte("fresh"), []byte("x"))
	m.Delete([]byte{'k', 2})
	m.Update([]byte{'k', 3}, func(v []byte, ok bool) ([]byte, Op) { return append(v, '!'), OpPut })
	if h, err := m.AcquireInt64([]byte("pin")); err == nil {
		h.Add(1)
	}
	for i := range 16 { // in a map that evicts, through its FIFOs
		m.Put([]byte{'n', byte(i)}, []byte("n"))
	}
}

// FuzzOpen writes fuzzed bytes over the header of a valid map, optionally
// re-sealing the checksum so that the geometry checks are reached, and cuts
// the file to a fuzzed length. Open must reject what is inconsistent with a
// sentinel error, and no accepted file may make any operation panic.
func FuzzOpen(f *testing.F) {
	fastHolderChecks(f)
	img := tinyImage(f)
	f.Add(img[:checksumOff], true, uint32(len(img)))
	f.Add(img[:64], false, uint32(len(img)))
	f.Add([]byte(magic), true, uint32(100))
	f.Add([]byte{}, false, uint32(0))
	f.Fuzz(func(t *testing.T, hdr []byte, reseal bool, size uint32) {
		b := bytes.Clone(img)
		copy(b[:checksumOff], hdr)
		if reseal {
			binary.LittleEndian.PutUint64(b[checksumOff:], xxhash.Sum64(b[:checksumOff]))
		}
		b = b[:min(int(size), len(b))]
		m, err := openMemory(b, false)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotMap) && !errors.Is(err, ErrTruncated) &&
				!errors.Is(err, ErrVersion) && !errors.Is(err, ErrEmptyFile) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		defer m.Close()
		exercise(m)
	})
}

// FuzzDamage keeps the header valid and overwrites bytes of the segments
// with fuzzed data at fuzzed places: every operation must survive, and
// after Recover the map must pass Check.
func FuzzDamage(f *testing.F) {
	fastHolderChecks(f)
	imgs := [][]byte{tinyImage(f), grownImage(f), pendingTxImage(f), evictImage(f)}
	f.Add([]byte{0, 0, 1, 0xff})
	f.Add([]byte{0x10, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x00, 0x02, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, patch []byte) {
		for _, img := range imgs {
			damage(t, img, patch)
		}
	})
}

// damage applies patch to a copy of the map image img, then exercises it
// read-only and writable, and checks that Recover makes it pass Check.
func damage(t *testing.T, img, patch []byte) {
	b := bytes.Clone(img)
	body := b[headerSize:]
	// patch: repeated [offset uint16][n uint8][n bytes]; the offset is a
	// fraction of the body, so that it reaches a grown image's growth area.
	for len(patch) >= 3 {
		off := int(binary.LittleEndian.Uint16(patch)) * len(body) >> 16
		n := min(int(patch[2]), len(patch)-3)
		copy(body[off:], patch[3:3+n])
		patch = patch[3+n:]
	}
	for _, ro := range []bool{true, false} {
		m, err := openMemory(b, ro)
		if err != nil {
			t.Fatalf("header was valid: %v", err)
		}
		exercise(m)
		if !ro {
			if _, err := m.Recover(); err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if err := m.Check(); err != nil {
				t.Fatalf("Check after Recover: %v", err)
			}
		}
		m.Close()
	}
}

// FuzzOperations decodes bytes into puts, deletes, updates and gets and
// checks every result against a Go map.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 1, 5, 2, 1, 0, 3, 1, 1, 4, 2, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		m, err := openHeap(Options{Entries: 64, AverageKeySize: 2, AverageValueSize: 8, MaxValueSize: 64, Segments: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		model := map[string]string{}
		for len(ops) >= 3 {
			op, k, n := ops[0]%9, []byte{'k', ops[1]}, int(ops[2])%65
			ops = ops[3:]
			v := bytes.Repeat([]byte{byte(n)}, n)
			switch op {
			case 0, 1:
				err := m.Put(k, v)
				if errors.Is(err, ErrFull) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				model[string(k)] = string(v)
			case 2:
				ok, _ := m.Delete(k)
				if _, want := model[string(k)]; ok != want {
					t.Fatalf("Delete(%q) = %v", k, ok)
				}
				delete(model, string(k))
			case 3:
				err := m.Update(k, func(old []byte, found bool) ([]byte, Op) {
					if want, ok := model[string(k)]; ok != found || string(old) != want {
						t.Fatalf("Update(%q) saw %q, %v", k, old, found)
					}
					return append(old[:len(old):len(old)], 'u'), OpPut
				})
				if err == nil {
					model[string(k)] += "u"
				} else if !errors.Is(err, ErrFull) && !errors.Is(err, ErrValueTooLarge) {
					t.Fatal(err)
				}
			case 4:
				got, err := m.Get(k)
				want, ok := model[string(k)]
				if ok != (err == nil) || string(got) != want {
					t.Fatalf("Get(%q) = %q, %v; want %q", k, got, err, want)
				}
			case 5:
				stored, err := m.PutIfAbsent(k, v)
				if errors.Is(err, ErrFull) {
					continue
				}
				_, present := model[string(k)]
				if err != nil || stored == present {
					t.Fatalf("PutIfAbsent(%q) = %v, %v; present %v", k, stored, err, present)
				}
				if stored {
					model[string(k)] = string(v)
				}
			case 6: // CompareAndSwap with the model's value, or a wrong one when n is odd
				cur, present := model[string(k)]
				old := []byte(cur)
				if n%2 == 1 {
					old = append(old, 'x')
				}
				swapped, err := m.CompareAndSwap(k, old, v)
				if errors.Is(err, ErrFull) {
					continue
				}
				if want := present && n%2 == 0; err != nil || swapped != want {
					t.Fatalf("CompareAndSwap(%q) = %v, %v; want %v", k, swapped, err, want)
				}
				if swapped {
					model[string(k)] = string(v)
				}
			case 7:
				cur, present := model[string(k)]
				deleted, err := m.CompareAndDelete(k, []byte(cur))
				if err != nil || deleted != present {
					t.Fatalf("CompareAndDelete(%q) = %v, %v; present %v", k, deleted, err, present)
				}
				delete(model, string(k))
			case 8: // UpdateKeys swaps two keys' values; ViewKeys sees both
				k2 := []byte{'k', k[1] + 1 + byte(n)%255}
				keys := [][]byte{k, k2}
				err := m.UpdateKeys(keys, func(vs [][]byte, found []bool) ([][]byte, []Op) {
					ops := []Op{OpDelete, OpDelete}
					out := [][]byte{nil, nil}
					for i := range 2 {
						if found[1-i] {
							ops[i], out[i] = OpPut, append([]byte(nil), vs[1-i]...)
						}
					}
					return out, ops
				})
				if errors.Is(err, ErrFull) {
					// Nothing changed.
					for _, kk := range keys {
						got, err := m.Get(kk)
						if want, ok := model[string(kk)]; ok != (err == nil) || string(got) != want {
							t.Fatalf("UpdateKeys failed with ErrFull but changed %q: %q %v, want %q", kk, got, err, want)
						}
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				a, aok := model[string(k)]
				b, bok := model[string(k2)]
				delete(model, string(k))
				delete(model, string(k2))
				if bok {
					model[string(k)] = b
				}
				if aok {
					model[string(k2)] = a
				}
				err = m.ViewKeys(keys, func(vs [][]byte, found []bool) {
					for i, kk := range keys {
						want, ok := model[string(kk)]
						if found[i] != ok || string(vs[i]) != want {
							t.Fatalf("ViewKeys(%q) = %q %v, want %q %v", kk, vs[i], found[i], want, ok)
						}
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				err = m.GetMany(keys, func(i int, v []byte, found bool) {
					want, ok := model[string(keys[i])]
					if found != ok || string(v) != want {
						t.Fatalf("GetMany(%q) = %q %v, want %q %v", keys[i], v, found, want, ok)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		if m.Len() != len(model) {
			t.Fatalf("Len %d, model %d", m.Len(), len(model))
		}
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// fastHolderChecks makes waiters check a lock holder at once: damaged
// files name random holders, and fuzzing should not wait for each.
func fastHolderChecks(f *testing.F) {
	old, oldStale := shm.FirstHolderCheck, staleAfter
	shm.FirstHolderCheck, staleAfter = 0, 0
	f.Cleanup(func() { shm.FirstHolderCheck, staleAfter = old, oldStale })
}

// FuzzFreeWords writes fuzzed free words (free.go) into a grown map, as
// damage or a foreign writer might: each patch of 4 bytes names a word, a
// place in the growth area or around it, and a size. Growth must go on
// without handing out space in use: every entry the map held, and every
// one put after, reads back; Recover then leaves the map sound.
func FuzzFreeWords(f *testing.F) {
	img := grownImage(f)
	f.Add([]byte{0, 0, 1, 0})
	f.Add([]byte{5, 128, 16, 0, 6, 130, 255, 0, 127, 255, 0, 1})
	f.Add([]byte{1, 10, 2, 0, 2, 10, 2, 0}) // two words, one region
	f.Fuzz(func(t *testing.T, patch []byte) {
		m, err := openMemory(bytes.Clone(img), false)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		model := map[string]string{}
		m.Range(func(k, v []byte) bool { model[string(k)] = string(v); return true })
		lo, hi := int(m.hdr.SegmentsOff), int(m.growth().allocEnd.Load())+1<<16
		for ; len(patch) >= 4; patch = patch[4:] {
			off := (lo + int(patch[1])*(hi-lo)/255) &^ 63
			n := (int(patch[2]) | int(patch[3])<<8) * 64
			m.freeWords()[int(patch[0])%freeWordCount].Store(freeWord(off, n))
		}
		m.Check()
		for i := range 400 {
			k, v := fmt.Sprintf("n%d", i), strings.Repeat("v", i%40)
			if err := m.Put([]byte(k), []byte(v)); err != nil {
				t.Fatalf("Put: %v", err)
			}
			model[k] = v
		}
		if _, err := m.Recover(); err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if err := m.Check(); err != nil {
			t.Fatalf("Check after Recover: %v", err)
		}
		for k, v := range model {
			if got, err := m.Get([]byte(k)); err != nil || string(got) != v {
				t.Fatalf("%q: %q, %v; want %q", k, got, err, v)
			}
		}
		if m.Len() != len(model) {
			t.Fatalf("Len %d, want %d", m.Len(), len(model))
		}
	})
}
