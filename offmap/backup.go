package offmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// BackupInfo describes a backup that BackupTo or Backup made.
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
// entry space the map has, free space included), so that writers wait
// only for that copy, at memory speed.
// Values that handles (AcquireInt64 and the others) change without a lock
// are copied as they are when their segment is copied, not at the
// instant. A backup takes segment locks, so it needs a map opened for
// writing: a read-only one returns ErrReadOnly.
func (m *Map) BackupTo(path string) (BackupInfo, error) {
	if err := m.enterBackup(); err != nil {
		return BackupInfo{}, err
	}
	defer m.exitWrite()
	if _, err := os.Lstat(path); err == nil {
		return BackupInfo{}, fmt.Errorf("offmap: backup of %s: %s: %w", m.path, path, os.ErrExist)
	}
	segs, info, t, err := m.backupSegments()
	if err != nil {
		return BackupInfo{}, err
	}
	info.Entries, info.FileSize, err = m.writeBackup(path, segs, t)
	if err != nil {
		return BackupInfo{}, &shm.OpError{Pkg: "offmap", Op: "backup", Path: path, Err: err}
	}
	return info, nil
}

// Backup writes a copy of the map to w, consistent at one instant as
// BackupTo's is: the bytes of the map file that BackupTo would write,
// which Open uses once they are stored in a file, e.g.
//
//	offmap backup app.map - | gzip > app.map.gz
//	gunzip < app.map.gz > restored.map
//
// The file carries no permission of its own: the one who stores the
// bytes sets it. BackupInfo.FileSize is the number of bytes written.
//
// The copy is built first, after every segment lock is released, as a
// temporary file without a name (O_TMPFILE on Linux; elsewhere created
// and removed at once) in the map's directory, which is on the map's
// file system and so has room for a copy of it; when the process may not
// write to that directory, in os.TempDir(). The file takes as much space
// as the copy, for as long as the backup runs; none is left behind
// however the backup ends (on systems without O_TMPFILE, a process killed
// in the instant between creating and removing the file leaves
// .offmap-unnamed-* behind). Only then is it copied to w, so a slow w
// (a pipe to gzip or ssh) stalls no writer of the map, and Close does
// not wait for it.
//
// An error from w is returned wrapped (errors.Is and errors.As see it);
// w may then hold part of the copy, which is not a map file. A closed
// map returns ErrClosed, a read-only one ErrReadOnly, as BackupTo.
func (m *Map) Backup(w io.Writer) (BackupInfo, error) {
	f, info, err := m.backupUnnamed()
	if err != nil {
		return BackupInfo{}, err
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err == nil && n != info.FileSize {
		err = fmt.Errorf("the copy ended after %d of its %d bytes", n, info.FileSize)
	}
	if err != nil {
		return BackupInfo{}, fmt.Errorf("offmap: backup of %s: writing the copy (%d of %d bytes written): %w", m.path, n, info.FileSize, err)
	}
	return info, nil
}

// backupUnnamed builds the copy Backup writes, in an unnamed temporary
// file, and returns it open at its first byte.
func (m *Map) backupUnnamed() (*os.File, BackupInfo, error) {
	if err := m.enterBackup(); err != nil {
		return nil, BackupInfo{}, err
	}
	defer m.exitWrite()
	dir := filepath.Dir(m.path)
	f, err := shm.CreateUnnamed(dir)
	if notWritable(err) {
		if f, err = shm.CreateUnnamed(os.TempDir()); err != nil {
			err = fmt.Errorf("%w (and %s is not writable)", err, dir)
		}
	}
	if err != nil {
		return nil, BackupInfo{}, &shm.OpError{Pkg: "offmap", Op: "backup", Path: m.path, Err: fmt.Errorf("creating a temporary file: %w", err)}
	}
	fail := func(err error) (*os.File, BackupInfo, error) {
		f.Close()
		return nil, BackupInfo{}, err
	}
	segs, info, t, err := m.backupSegments()
	if err != nil {
		return fail(err)
	}
	opts, h, err := m.backupPlan(segs)
	if err == nil {
		err = shm.Preallocate(f, int64(h.FileSize))
	}
	if err == nil {
		info.Entries, info.FileSize, err = m.buildBackup(f, f.Name(), opts, &h, segs, t, false)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fail(&shm.OpError{Pkg: "offmap", Op: "backup", Path: f.Name(), Err: err})
	}
	return f, info, nil
}

// enterBackup is enterWrite, with ErrReadOnly explained.
func (m *Map) enterBackup() error {
	err := m.enterWrite()
	if errors.Is(err, ErrReadOnly) {
		return fmt.Errorf("%w: %s: a backup holds every segment lock for an instant, which a read-only open cannot take; open the map for writing", ErrReadOnly, m.path)
	}
	return err
}

// notWritable reports whether err says a directory may not be written to.
func notWritable(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// backupSeg is one segment as the backup copied it, with its lock held:
// the words of its live slots, and the bytes of each of its extents'
// entry space (areas[k] is extent k's). Copying the extents whole, in
// sequence, is what keeps the lock short: picking the entries out, in
// slot order, would touch them at random.
type backupSeg struct {
	idx   int
	slots []uint64
	areas [][]byte
}

// backupSegments takes every segment lock in segment order, then copies
// and releases the segments one by one.
// It returns the segments, the backup's instant, and the package clock's
// reading then, which expiry is judged by.
func (m *Map) backupSegments() ([]backupSeg, BackupInfo, int64, error) {
	n := int(m.hdr.Segments)
	// The memory of the copies, taken and faulted in before any lock, as
	// the segments are now: one that grows meanwhile takes more while
	// locked.
	out := make([]backupSeg, n)
	for i := range out {
		s := m.segment(uint32(i))
		out[i].slots = make([]uint64, 0, s.hdr.count.Load()+s.hdr.count.Load()/8+16)
		out[i].areas = append(out[i].areas, touched(m.area0Len))
		for k := 1; k < m.extentCount(&s); k++ {
			out[i].areas = append(out[i].areas, touched(m.extentChunks(k)<<m.chunkShift))
		}
	}
	locked := make([]segment, n)
	var first time.Time
	for i := range locked {
		locked[i] = m.segment(uint32(i))
		if err := m.lock(&locked[i]); err != nil {
			for j := range i {
				locked[j].hdr.lock.Unlock()
			}
			return nil, BackupInfo{}, 0, err
		}
		if i == 0 {
			first = time.Now()
			crash("backup.locking")
		}
	}
	info, t := BackupInfo{At: time.Now()}, now()
	crash("backup.locked")
	for i := range locked {
		err := m.copyLocked(&locked[i], &out[i])
		locked[i].hdr.lock.Unlock()
		if err != nil {
			for j := i + 1; j < n; j++ {
				locked[j].hdr.lock.Unlock()
			}
			return nil, BackupInfo{}, 0, err
		}
	}
	info.Stall = time.Since(first)
	return out, info, t, nil
}

// copyLocked copies segment s, whose lock is held (so it was repaired if
// its last holder died, and holds no transaction), into b, in the memory
// b has where it is large enough.
func (m *Map) copyLocked(s *segment, b *backupSeg) error {
	b.idx = s.idx
	if !m.loadTable(s) {
		return m.corrupt(s, "its slot table lies outside the file")
	}
	b.slots = b.slots[:0]
	for i := range s.slots {
		if w := s.slots[i].Load(); w != 0 && w&slotDetached == 0 {
			b.slots = append(b.slots, w)
		}
	}
	area := s.base + int(m.hdr.AreaOff)
	areas := make([][]byte, m.extentCount(s))
	for j := range areas {
		mem := s.mem[area : area+m.area0Len]
		if j > 0 {
			off, ok := m.extentAt(s, j)
			if !ok {
				return m.corrupt(s, fmt.Sprintf("its extent %d lies outside the file", j))
			}
			off += m.extentBitmapBytes(j)
			mem = s.mem[off : off+m.extentChunks(j)<<m.chunkShift]
		}
		if j < len(b.areas) && len(b.areas[j]) == len(mem) {
			areas[j] = b.areas[j]
		} else {
			areas[j] = make([]byte, len(mem))
		}
		shm.Load(areas[j], mem)
	}
	b.areas = areas
	return nil
}

// extentCount is how many extents s has, its first included: they are
// added in order.
func (m *Map) extentCount(s *segment) int {
	k := 1
	for k <= m.maxExtent() && s.hdr.extents[k-1].Load() != 0 {
		k++
	}
	return k
}

// touched returns n bytes of memory with every page faulted in.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 0
	}
	return b
}

// backupEntries calls fn with every entry of b that had not expired by t
// (Unix nanoseconds), and its expiry time. Each offset and length is
// checked against the copied extents.
func (m *Map) backupEntries(b *backupSeg, t int64, fn func(key, value []byte, expires int64) error) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: %s: segment %d: %s (run offmap verify)", ErrCorrupt, m.path, b.idx, what)
	}
	for _, w := range b.slots {
		k, i := m.extentOf(slotChunk(w))
		if k < 0 || k >= len(b.areas) {
			return bad(fmt.Sprintf("a slot names chunk %d, which no extent holds", slotChunk(w)))
		}
		a, off := b.areas[k], i<<m.chunkShift
		if off > len(a)-entryHeaderSize {
			return bad("an entry lies outside its extent")
		}
		kl, vl := int(binary.LittleEndian.Uint32(a[off:])), int(binary.LittleEndian.Uint32(a[off+4:]))
		if kl > int(m.hdr.MaxKey) || vl > int(m.hdr.MaxValue) || off+entryBytes(kl, vl, m.trailer) > len(a) {
			return bad("an entry lies outside its extent")
		}
		e := entry{off: off, keyLen: kl, valLen: vl}
		key, value := a[e.keyOff():e.keyOff()+kl], a[e.valOff():e.valOff()+vl]
		if m.sums && w&slotPinned == 0 && binary.LittleEndian.Uint64(a[e.sumOff():]) != uint64(entrySum(key, value)) {
			return bad("an entry fails its checksum (torn by a power cut, or damaged)")
		}
		var x int64
		if m.expiring {
			if x = int64(binary.LittleEndian.Uint64(a[m.expOff(e):])); x != 0 && x <= t {
				continue
			}
		}
		if err := fn(key, value, x); err != nil {
			return err
		}
	}
	return nil
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

// writeBackup builds the map file of segs, leaving out the entries
// expired by t, at path, and returns its entries and size.
func (m *Map) writeBackup(path string, segs []backupSeg, t int64) (int, int64, error) {
	opts, h, err := m.backupPlan(segs)
	if err != nil {
		return 0, 0, err
	}
	var n int
	var size int64
	err = shm.CreateAtomic(path, opts.fileMode(), int64(h.FileSize), true, func(f *os.File) error {
		n, size, err = m.buildBackup(f, path, opts, &h, segs, t, true)
		return err
	})
	return n, size, err
}

// backupPlan is the options and header of the compact copy of segs.
func (m *Map) backupPlan(segs []backupSeg) (Options, header, error) {
	entries := 0
	for i := range segs {
		entries += len(segs[i].slots)
	}
	opts := m.backupOptions(entries)
	h, err := plan(opts, randomSeed())
	return opts, h, err
}

// buildBackup writes the map file of segs (header h, of options opts),
// leaving out the entries expired by t, into f: a new file that nothing
// else uses, h.FileSize bytes long, which name names in errors. With
// durable set, the file is synced. It returns the entries written and
// the file's size. f stays open, its offset unchanged.
func (m *Map) buildBackup(f *os.File, name string, opts Options, h *header, segs []backupSeg, t int64, durable bool) (int, int64, error) {
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return 0, 0, err
	}
	// The map takes a descriptor of its own, which its Close closes; the
	// caller closes f.
	g, err := shm.Dup(f)
	if err != nil {
		return 0, 0, err
	}
	dst, err := openMapped(g, name, false, opts)
	if err != nil {
		g.Close()
		return 0, 0, err
	}
	n, err := m.fillBackup(dst, segs, t)
	if err == nil && durable {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	size, err := shm.FileSize(f)
	return n, size, err
}

// fillBackup puts every entry of segs into dst, with its expiry time, and
// returns how many.
func (m *Map) fillBackup(dst *Map, segs []backupSeg, t int64) (int, error) {
	n := 0
	for i := range segs {
		err := m.backupEntries(&segs[i], t, func(key, value []byte, expires int64) error {
			n++
			if n == 100 {
				crash("backup.filling")
			}
			if !dst.expiring {
				return dst.Put(key, value)
			}
			var at time.Time
			if expires != 0 {
				at = time.Unix(0, expires)
			}
			return dst.PutExpiring(key, value, at)
		})
		if err != nil {
			return n, err
		}
		segs[i] = backupSeg{} // its memory can go
	}
	return n, nil
}
