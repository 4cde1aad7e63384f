package offmap

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// Backups. Range copies each segment at its own instant, so a copy made
// with it may hold half of an UpdateKeys. BackupTo copies all segments at
// one instant instead: it takes every segment lock, in the order
// UpdateKeys takes them (so it waits for no one who waits for it), and
// the moment it holds them all is the backup's instant. No transaction is
// half done then (each holds all of its segments' locks while it runs),
// and every write that returned before it is in. It then copies the
// segments into memory one by one, releasing each lock once its segment
// is copied: a writer stalls at most until its segment is copied, the
// copy of the whole map at memory speed, never for the writing of the
// new file, which happens after every lock is released. Readers take no
// lock and never wait: the versions stay even throughout.

// BackupInfo describes a backup that BackupTo made.
type BackupInfo struct {
	Entries int       // entries the copy holds
	At      time.Time // the instant the copy is of: every segment lock held
	// Stall is how long the backup held segment locks: from taking the
	// first to releasing the last. A writer waited at most this long
	// (plus the time to take the locks, when busy writers delayed it).
	Stall    time.Duration
	FileSize int64 // of the copy
}

// BackupTo writes a copy of the map at path, consistent at one instant
// (BackupInfo.At) while other goroutines and processes keep reading and
// writing it: every UpdateKeys is in the copy entirely or not at all, and
// every write that returned before the instant is in it. The copy is a
// new map file, compact as 'offmap copy' makes one (none of the space the
// map's growth left unused), of the map's layout, file permission,
// checksums and expiry: each entry keeps its expiry time, and an entry
// that had expired at the instant is left out. Open uses it directly.
//
// path must not exist: the file is built with no name and linked at path
// only when complete and synced, so that a backup that fails or is killed
// leaves nothing at path (ErrExist wraps os.ErrExist when it exists).
// A backup killed while holding segment locks is a dead holder like any
// other: the next writer takes the lock over within about a second, and
// the map is unchanged.
//
// The copy is made in this process's memory first (about the bytes of
// the live keys and values), so that writers wait only for that copy.
// Values that handles (AcquireInt64 and the others) change without a lock
// are copied as they are when their segment is copied, not at the
// instant. A backup takes segment locks, so it needs a map opened for
// writing: a read-only one returns ErrReadOnly.
func (m *Map) BackupTo(path string) (BackupInfo, error) {
	if err := m.enterWrite(); err != nil {
		if errors.Is(err, ErrReadOnly) {
			return BackupInfo{}, fmt.Errorf("%w: %s: a backup holds every segment lock for an instant, which a read-only open cannot take; open the map for writing", ErrReadOnly, m.path)
		}
		return BackupInfo{}, err
	}
	defer m.exitWrite()
	if _, err := os.Lstat(path); err == nil {
		return BackupInfo{}, fmt.Errorf("offmap: backup of %s: %s: %w", m.path, path, os.ErrExist)
	}
	segs, info, err := m.backupSegments()
	if err != nil {
		return BackupInfo{}, err
	}
	info.FileSize, err = m.writeBackup(path, segs, info.Entries)
	if err != nil {
		return BackupInfo{}, &shm.OpError{Pkg: "offmap", Op: "backup", Path: path, Err: err}
	}
	return info, nil
}

// backupSeg is one segment's entries as the backup copied them: keys and
// values in buf, and per entry its offsets and expiry time.
type backupSeg struct {
	buf     []byte
	entries []backupEntry
}

type backupEntry struct {
	key, val, end int   // in buf: the key is buf[key:val], the value buf[val:end]
	expires       int64 // Unix nanoseconds, 0: never
}

// backupSegments takes every segment lock in segment order, then copies
// and releases the segments one by one.
func (m *Map) backupSegments() ([]backupSeg, BackupInfo, error) {
	n := int(m.hdr.Segments)
	locked := make([]segment, n)
	for i := range locked {
		locked[i] = m.segment(uint32(i))
		if err := m.lock(&locked[i]); err != nil {
			for j := range i {
				locked[j].hdr.lock.Unlock()
			}
			return nil, BackupInfo{}, err
		}
		if i == 0 {
			crash("backup.first-lock")
		}
	}
	info := BackupInfo{At: time.Now()}
	t := now()
	crash("backup.all-locked")
	out := make([]backupSeg, n)
	for i := range locked {
		var err error
		out[i], err = m.copyLocked(&locked[i], t)
		locked[i].hdr.lock.Unlock()
		if err != nil {
			for j := i + 1; j < n; j++ {
				locked[j].hdr.lock.Unlock()
			}
			return nil, BackupInfo{}, err
		}
		info.Entries += len(out[i].entries)
	}
	info.Stall = time.Since(info.At)
	return out, info, nil
}

// copyLocked copies the live entries of s, whose lock is held (so it was
// repaired if its last holder died, and holds no transaction), leaving
// out those expired by t.
func (m *Map) copyLocked(s *segment, t int64) (backupSeg, error) {
	var b backupSeg
	if !m.loadTable(s) {
		return b, m.corrupt(s, "its slot table lies outside the file")
	}
	// Sized first, so that the copy moves each byte once: the lock is
	// held meanwhile.
	size, count := 0, 0
	for i := range s.slots {
		w := s.slots[i].Load()
		if w == 0 || w&slotDetached != 0 {
			continue
		}
		if e, ok := m.entryAt(s, slotChunk(w)); ok {
			size += e.keyLen + e.valLen
			count++
		}
	}
	b.buf = make([]byte, 0, size)
	b.entries = make([]backupEntry, 0, count)
	for i := range s.slots {
		w := s.slots[i].Load()
		if w == 0 || w&slotDetached != 0 {
			continue
		}
		e, ok := m.entryAt(s, slotChunk(w))
		if !ok {
			return b, m.corrupt(s, "an entry lies outside the segment")
		}
		var x int64
		if m.expiring {
			if expiredAt(s.mem, m.expOff(e), t) {
				continue
			}
			x = int64(shm.U64(s.mem, m.expOff(e)).Load())
		}
		k := len(b.buf)
		b.buf = append(b.buf, make([]byte, e.keyLen)...)
		loadKey(b.buf[k:], s, e)
		v := len(b.buf)
		b.buf = loadValue(b.buf, s, e)
		if m.sumRejects(s.mem, w, e.sumOff(), b.buf[k:v], b.buf[v:]) {
			return b, m.corrupt(s, "an entry fails its checksum (torn by a power cut, or damaged); run offmap verify")
		}
		b.entries = append(b.entries, backupEntry{key: k, val: v, end: len(b.buf), expires: x})
	}
	return b, nil
}

// backupOptions are the options of a compact copy of m holding entries
// entries: m's layout, with room for them from the start.
func (m *Map) backupOptions(entries int) Options {
	h := &m.hdr
	o := Options{
		Entries:          max(int(h.Entries), entries),
		AverageKeySize:   int(h.AvgKey),
		AverageValueSize: int(h.AvgValue),
		MaxKeySize:       int(h.MaxKey),
		MaxValueSize:     int(h.MaxValue),
		Segments:         int(h.Segments),
		MaxFileSize:      int64(h.MaxFileSize),
		ChecksumEntries:  m.sums,
		TTL:              time.Duration(h.TTL),
		Expiring:         m.expiring,
		FileMode:         0o600,
		set:              h.MaxValue == 0,
	}
	if o.set {
		o.AverageValueSize = 0
	}
	if m.file != nil {
		if fi, err := m.file.Stat(); err == nil {
			o.FileMode = fi.Mode().Perm()
		}
	}
	return o
}

// writeBackup builds the map file of segs at path and returns its size.
func (m *Map) writeBackup(path string, segs []backupSeg, entries int) (int64, error) {
	opts := m.backupOptions(entries)
	h, err := plan(opts, randomSeed())
	if err != nil {
		return 0, err
	}
	var size int64
	err = shm.CreateAtomic(path, opts.fileMode(), int64(h.FileSize), true, func(f *os.File) error {
		if _, err := f.WriteAt(h.encode(), 0); err != nil {
			return err
		}
		// The map takes a descriptor of its own, which its Close closes;
		// CreateAtomic links and closes f.
		fd, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			return err
		}
		g := os.NewFile(uintptr(fd), path)
		dst, err := openMapped(g, path, false, opts)
		if err != nil {
			g.Close()
			return err
		}
		err = fillBackup(dst, segs)
		if err == nil {
			err = dst.Sync()
		}
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil {
			size = fi.Size()
		}
		return err
	})
	return size, err
}

// fillBackup puts every copied entry into dst, with its expiry time.
func fillBackup(dst *Map, segs []backupSeg) error {
	for i := range segs {
		b := &segs[i]
		for j, e := range b.entries {
			key, val := b.buf[e.key:e.val], b.buf[e.val:e.end]
			var err error
			if dst.expiring {
				var at time.Time
				if e.expires != 0 {
					at = time.Unix(0, e.expires)
				}
				err = dst.PutExpiring(key, val, at)
			} else {
				err = dst.Put(key, val)
			}
			if err != nil {
				return err
			}
			if j == len(b.entries)/2 && i == len(segs)/2 {
				crash("backup.filling")
			}
		}
		segs[i] = backupSeg{} // its memory can go
	}
	return nil
}
