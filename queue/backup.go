package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// BackupInfo describes a backup that Backup made.
type BackupInfo struct {
	// End is the index after the last message the copy holds: every
	// message of the queue before End is in it, in order (but those
	// retention had deleted), and none after.
	End      uint64
	Messages int64    // messages in the copy (Count over it)
	Cycles   []uint32 // the cycle files copied, oldest first
	Tailers  int      // named tailers copied
}

// Backup copies the queue into a new directory dest while other processes
// keep appending and reading: every cycle file up to the first message
// not yet complete (a writer still writing it), so that the copy ends at
// a committed index (BackupInfo.End), with everything before it, and the
// named tailers' positions (a position past End is brought back to End).
// The copy has no writers and no watchers; queue.Open and offqueue verify
// use it as it is, and appenders continue it from End.
//
// Each cycle is copied from this process's mapping up to the end, which a
// walk of its slots finds, with the bytes after the end left zero and the cycle's
// header (its write hint, index and next-cycle words) made to agree with
// that end. dest must not exist: the copy is built under a temporary name
// beside it (".NAME.backup-PID", or ".NAME.backup-PID-N" when that name
// is taken) and renamed to dest when complete and synced, so that a
// backup that fails or is killed leaves nothing at dest.
//
// A backup killed (kill -9, a crash) leaves its temporary directory; a
// later Backup into the same parent directory removes it. Every Backup
// holds a shared lock (flock; LockFileEx on Windows) on the file
// ".offqueue-backup.lock" in dest's parent directory, which it creates
// with the queue's file mode and leaves there, from before it makes its
// temporary directory until it returns. A Backup that can take that lock
// exclusively (no other backup is running into that directory, in any
// process, pid namespace or user) first removes every leftover there: a
// directory named as above that holds nothing but regular files named
// as a queue's metadata and cycle files. Anything else, such as a
// directory of another name or with other contents, a file or a
// symbolic link, is left alone. Backups by other users into the same
// directory need read permission on the lock file.
func (q *Queue) Backup(dest string) (BackupInfo, error) {
	var info BackupInfo
	if q.closed.Load() {
		return info, ErrClosed
	}
	if _, err := os.Lstat(dest); err == nil {
		return info, fmt.Errorf("queue: backup of %s: %s: %w", q.dir, dest, os.ErrExist)
	}
	parent := filepath.Dir(dest)
	lock, err := q.lockBackups(parent)
	if err != nil {
		return info, fmt.Errorf("queue: backup of %s: %w", q.dir, err)
	}
	defer lock.Close() // after the rename: the lock covers tmp while it exists
	tmp, err := makeBackupDir(parent, filepath.Base(dest))
	if err != nil {
		return info, fmt.Errorf("queue: backup of %s: %w", q.dir, err)
	}
	if backupHook != nil {
		backupHook(tmp, 0)
	}
	err = q.backupInto(tmp, &info)
	if err == nil {
		err = shm.SyncDir(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err == nil {
		err = shm.SyncDir(filepath.Dir(dest))
	}
	if err != nil {
		os.RemoveAll(tmp)
		return BackupInfo{}, fmt.Errorf("queue: backup of %s to %s: %w", q.dir, dest, err)
	}
	return info, nil
}

// backupLockName is the lock file every Backup holds, shared, in dest's
// parent directory while it runs; one that holds it exclusively knows
// that no backup is running there, and removes the temporary directories
// killed ones left.
const backupLockName = ".offqueue-backup.lock"

// backupHook, when set (only by tests), is called with the temporary
// directory once Backup has made it (cycles 0) and after each cycle file
// it copied into it (cycles 1, 2, ...).
var backupHook func(tmp string, cycles int)

// lockBackups opens (or creates) the lock file in parent and returns it
// holding a shared lock, which the caller holds until its temporary
// directory is gone. If it can take the lock exclusively first, no
// backup is running into parent, and it removes what killed ones left.
func (q *Queue) lockBackups(parent string) (*os.File, error) {
	path := filepath.Join(parent, backupLockName)
	// Read-only is enough for flock and LockFileEx, and lets processes
	// of other users that may read the file share it.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, q.fileMode())
	if err != nil {
		return nil, fmt.Errorf("backup lock: %w", err)
	}
	switch err := shm.Flock(f, true, true); {
	case err == nil:
		removeStaleBackups(parent)
	case !errors.Is(err, shm.ErrWouldBlock):
		f.Close()
		return nil, fmt.Errorf("backup lock: %w", err)
	}
	// Shared, waiting for a process that holds it exclusively to finish
	// cleaning (from exclusive this converts, not atomically, which does
	// not matter: no temporary directory of ours exists yet).
	if err := shm.Flock(f, false, false); err != nil {
		f.Close()
		return nil, fmt.Errorf("backup lock: %w", err)
	}
	return f, nil
}

// makeBackupDir makes the temporary directory of a backup to parent/name:
// .NAME.backup-PID, or .NAME.backup-PID-N (N = 2, 3, ...) when that
// exists, which is a live backup's when this process (another goroutine)
// or a process of the same pid in another pid namespace is backing up to
// the same name, or a leftover that could not be removed.
func makeBackupDir(parent, name string) (string, error) {
	base := fmt.Sprintf(".%s.backup-%d", name, os.Getpid())
	tmp := filepath.Join(parent, base)
	for n := 2; ; n++ {
		err := os.Mkdir(tmp, 0o700)
		if err == nil {
			return tmp, nil
		}
		if !errors.Is(err, os.ErrExist) || n > 1000 {
			return "", err
		}
		tmp = filepath.Join(parent, fmt.Sprintf("%s-%d", base, n))
	}
}

// removeStaleBackups removes from parent the temporary directories that
// killed backups left; the caller holds the backup lock exclusively, so
// none is a live backup's. It removes only what is certainly one: a
// directory (not a symbolic link) named as makeBackupDir names them that
// holds nothing but regular files named as a queue's metadata or cycle
// files (of any roll cycle), and it removes those files one by one and
// the directory only if that empties it. Errors leave things as they are.
func removeStaleBackups(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.Type().IsDir() || !isBackupTempName(e.Name()) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		ok := true
		for _, f := range files {
			if !f.Type().IsRegular() || f.Name() != metaName && !isCycleFileName(f.Name()) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for _, f := range files {
			os.Remove(filepath.Join(dir, f.Name()))
		}
		os.Remove(dir) // fails, leaving it, if anything else is there now
	}
}

// isBackupTempName reports whether name is one makeBackupDir makes:
// "." NAME ".backup-" PID, optionally "-" N with N >= 2, where PID and N
// are decimal numbers without leading zeros and NAME is not empty.
func isBackupTempName(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	i := strings.LastIndex(rest, ".backup-")
	if !ok || i < 1 {
		return false
	}
	pid, n, suffixed := strings.Cut(rest[i+len(".backup-"):], "-")
	return isDecimal(pid) && (!suffixed || isDecimal(n) && n != "1")
}

// isDecimal reports whether s is a positive decimal number as %d prints
// one that fits in 64 bits.
func isDecimal(s string) bool {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isCycleFileName reports whether name is a cycle file's name in the
// layout of one of the roll cycles.
func isCycleFileName(name string) bool {
	base, ok := strings.CutSuffix(name, cycleSuffix)
	if !ok {
		return false
	}
	for r := range rolls {
		if !RollCycle(r).valid() {
			continue
		}
		layout := rolls[r].layout
		if t, err := time.Parse(layout, base); err == nil && t.Format(layout) == base {
			return true
		}
	}
	return false
}

func (q *Queue) backupInto(tmp string, info *BackupInfo) error {
	ns, err := q.listCycles()
	if err != nil {
		return err
	}
	var last uint32
	copied := false
	for i := 0; i < len(ns); i++ {
		n := ns[i]
		end, next, err := q.backupCycle(n, filepath.Join(tmp, q.cycleName(n)), &info.Messages)
		if errors.Is(err, os.ErrNotExist) && !copied {
			continue // deleted by retention meanwhile
		}
		if err != nil {
			return fmt.Errorf("cycle %d: %w", n, err)
		}
		copied, last = true, n
		info.Cycles = append(info.Cycles, n)
		if backupHook != nil {
			backupHook(tmp, len(info.Cycles))
		}
		info.End = Index(n, end)
		if next == 0 {
			break // the copy ends here: later cycles hold later messages
		}
		// Sealed: the cycle it names follows, even one created after the
		// listing.
		ns = append(ns[:i+1], uint32(next-1))
	}
	return q.backupMeta(filepath.Join(tmp, metaName), info, copied, last)
}

// backupCycle copies cycle n to path up to its end: its end-of-cycle
// mark, or the first free slot or slot a live writer has not completed.
// It returns the sequence number the copy ends at and, for a sealed
// cycle, the next cycle + 1 (0 for one not sealed), and adds the
// messages it holds to *msgs.
func (q *Queue) backupCycle(n uint32, path string, msgs *int64) (end uint32, next uint64, err error) {
	c, _, err := q.acquire(n, false, 0)
	if err != nil {
		return 0, 0, err
	}
	defer c.release()
	if err := c.checkSize(); err != nil {
		return 0, 0, err
	}
	size, err := c.fileSize()
	if err != nil {
		return 0, 0, err
	}
	sealed := false
	w := c.walkFrom(0, dataStart)
	for {
		h, err := w.header()
		if err != nil {
			return 0, 0, err
		}
		if h == 0 || h&flagBusy != 0 && !q.writerDead(h) {
			break
		}
		if h&flagEOF != 0 {
			// A roller names the next cycle before it seals.
			sealed, next = true, c.next.Load()
			if err := w.step(h); err != nil {
				return 0, 0, err
			}
			break
		}
		if h&(flagMeta|flagSkipped|flagBusy) == 0 {
			*msgs++
		}
		if err := w.step(h); err != nil {
			return 0, 0, err
		}
	}
	cut := w.off // the copy's bytes: [0, cut), then zeros
	mem := w.mem
	// The header page, with its shared words as they agree with the cut;
	// the slots go from the mapping to the file as they are, and then
	// the index entries of messages past the cut are cleared.
	head := make([]byte, dataStart)
	shm.Load(head, mem[:dataStart])
	le := binary.LittleEndian
	if !sealed {
		le.PutUint64(head[nextOff:], 0)
		le.PutUint64(head[hintOff:], packHint(w.seq, w.off))
	}
	var clear [][2]int64 // [from, to) of the file
	for a := range l1Entries {
		o := l1Off + 8*a
		arr := int64(le.Uint64(head[o:]))
		if arr == 0 {
			continue
		}
		if arr < dataStart || arr+indexArrayBytes > cut {
			le.PutUint64(head[o:], 0) // an index array past the cut
			continue
		}
		// Entry e of array a is message (a*indexEntries + e) << spacing.
		first := max(int64(0), (int64(w.seq)+(1<<q.spacing)-1)>>q.spacing-int64(a)*indexEntries)
		if first < indexEntries {
			clear = append(clear, [2]int64{arr + first*8, arr + indexArrayBytes})
		}
	}
	// At least one free slot after the cut, in whole pages, as the queue
	// maps them; the file may have grown during the walk.
	if now, err := c.fileSize(); err == nil && now > size {
		size = now
	}
	size = max(size, shm.Pad(cut+8, pageSize))
	if sealed && (next == 0 || next-1 <= uint64(n)) {
		return 0, 0, fmt.Errorf("%w: cycle %d is sealed but names cycle %d next", ErrCorrupt, n, int64(next)-1)
	}
	return w.seq, next, writeFileSynced(path, size, q.fileMode(), func(f *os.File) error {
		if _, err := f.Write(head); err != nil {
			return err
		}
		if _, err := f.Write(mem[dataStart:cut]); err != nil {
			return err
		}
		for _, r := range clear {
			if _, err := f.WriteAt(make([]byte, r[1]-r[0]), r[0]); err != nil {
				return err
			}
		}
		return nil
	})
}

// backupMeta writes the copy's metadata file: the queue's header, the
// latest cycle, and the named tailers (none of the locks, leases or
// watchers).
func (q *Queue) backupMeta(path string, info *BackupInfo, any bool, last uint32) error {
	b := q.meta.encode()
	le := binary.LittleEndian
	if any {
		le.PutUint64(b[metaLatestOff:], uint64(last)+1)
	}
	for i := range maxNamedTailers {
		n := q.tailerWord(i, 0).Load()
		if n == 0 {
			continue
		}
		name, ok := q.tailerName(i, n)
		if !ok {
			continue // a damaged slot: verify reports it in the source
		}
		acked := q.tailerWord(i, 8).Load()
		if acked != 0 && acked-1 > info.End {
			acked = info.End + 1
		}
		base := tailerTableOff + i*tailerSlotSize
		le.PutUint64(b[base:], n)
		le.PutUint64(b[base+8:], acked)
		shm.Load(b[base+16:base+16+int(n)], name)
		info.Tailers++
	}
	return writeFileSynced(path, int64(len(b)), q.fileMode(), func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// writeFileSynced makes a new file of size bytes at path, with
// permission mode, lets write fill it, and syncs it.
func writeFileSynced(path string, size int64, mode os.FileMode, write func(f *os.File) error) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Truncate(size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fileMode is the permission of the queue's metadata file.
func (q *Queue) fileMode() os.FileMode {
	if fi, err := q.metaFile.Stat(); err == nil {
		return fi.Mode().Perm()
	}
	return 0o600
}
