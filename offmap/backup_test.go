package offmap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
	"github.com/offmap/offmap/internal/shm"
)

// The backup tests run transfers between accounts: each UpdateKeys moves
// an amount between two accounts, sets its process's count of transfers
// and inserts a log entry (so the map grows meanwhile). Transfer k of
// process c is a function of (c, k) alone, so that from the counts a
// backup holds, the balances it must hold can be computed: a backup
// equals the source at the instant each process had made exactly its
// count of transfers.

const (
	accounts   = 48
	initialBal = 1000
)

func accountKey(i int) []byte  { return fmt.Appendf(nil, "acct-%02d", i) }
func txCountKey(c int) []byte  { return fmt.Appendf(nil, "txcount-%d", c) }
func txLogKey(c, k int) []byte { return fmt.Appendf(nil, "log-%d-%06d", c, k) }

func i64(v []byte) int64 {
	if len(v) != 8 {
		return -1 << 62
	}
	return int64(binary.LittleEndian.Uint64(v))
}

// transferOf is transfer k of process c: from, to and amount.
func transferOf(c, k int) (from, to int, amount int64) {
	r := rand.New(rand.NewPCG(uint64(c), uint64(k)))
	from = r.IntN(accounts)
	to = (from + 1 + r.IntN(accounts-1)) % accounts
	return from, to, int64(1 + r.IntN(100))
}

func transferOptions() Options {
	// Small to start, so that the log entries make it grow during a backup.
	return Options{Entries: 256, AverageKeySize: 12, AverageValueSize: 8, MaxValueSize: 64, Segments: 16, LockTimeout: 20 * time.Second}
}

func seedAccounts(t testing.TB, m *Map) {
	t.Helper()
	for i := range accounts {
		if err := m.Put(accountKey(i), s64(initialBal)); err != nil {
			t.Fatal(err)
		}
	}
}

// backupTransfer makes transfer k of process c.
func backupTransfer(m *Map, c, k int) error {
	from, to, amount := transferOf(c, k)
	keys := [][]byte{accountKey(from), accountKey(to), txCountKey(c), txLogKey(c, k)}
	return m.UpdateKeys(keys, func(v [][]byte, found []bool) ([][]byte, []Op) {
		return [][]byte{s64(i64(v[0]) - amount), s64(i64(v[1]) + amount), s64(int64(k)), s64(amount)},
			[]Op{OpPut, OpPut, OpPut, OpPut}
	})
}

func init() {
	children["transfers"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{LockTimeout: 20 * time.Second})
		if err != nil {
			return err
		}
		defer m.Close()
		c, _ := strconv.Atoi(os.Getenv("C"))
		n, _ := strconv.Atoi(os.Getenv("N"))
		for k := 1; k <= n; k++ {
			if err := backupTransfer(m, c, k); err != nil {
				return fmt.Errorf("transfer %d: %w", k, err)
			}
		}
		return nil
	}
	children["backup"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{LockTimeout: 20 * time.Second})
		if err != nil {
			return err
		}
		if step := os.Getenv("KILL_AT"); step != "" {
			crashPoint = func(s string) {
				if s == step {
					reexec.Die()
				}
			}
		}
		fmt.Println("opened")
		if _, err := m.BackupTo(os.Getenv("DEST")); err != nil {
			return err
		}
		fmt.Println("done")
		return m.Close()
	}
}

// checkTransfers checks that the map at path is sound and holds the
// state after exactly the first counts[c] transfers of each process c
// (procs of them), and returns the counts.
func checkTransfers(t *testing.T, path string, procs int) []int {
	t.Helper()
	m, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Check(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	counts := make([]int, procs)
	want := make([]int64, accounts)
	for i := range want {
		want[i] = initialBal
	}
	entries := accounts
	for c := range procs {
		if v, err := m.Get(txCountKey(c)); err == nil {
			counts[c] = int(i64(v))
			entries++
		} else if !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		for k := 1; k <= counts[c]; k++ {
			from, to, amount := transferOf(c, k)
			want[from] -= amount
			want[to] += amount
			if v, err := m.Get(txLogKey(c, k)); err != nil || i64(v) != amount {
				t.Fatalf("%s: process %d's count is %d but its log entry %d is %v, %v", path, c, counts[c], k, v, err)
			}
		}
		entries += counts[c]
		if _, err := m.Get(txLogKey(c, counts[c]+1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: process %d's count is %d but log entry %d is there: %v", path, c, counts[c], counts[c]+1, err)
		}
	}
	var total int64
	for i := range accounts {
		v, err := m.Get(accountKey(i))
		if err != nil {
			t.Fatal(err)
		}
		total += i64(v)
		if i64(v) != want[i] {
			t.Fatalf("%s: account %d holds %d; after the transfers %v it holds %d", path, i, i64(v), counts, want[i])
		}
	}
	if total != accounts*initialBal {
		t.Fatalf("%s: total %d, want %d", path, total, accounts*initialBal)
	}
	if m.Len() != entries {
		t.Fatalf("%s: %d entries, want %d", path, m.Len(), entries)
	}
	return counts
}

// backupWays are the two ways to make a backup at dest: BackupTo, and
// Backup into a writer (an in-memory buffer, as a pipe would take it)
// whose bytes are then stored at dest.
var backupWays = []struct {
	name string
	to   func(m *Map, dest string) (BackupInfo, error)
}{
	{"BackupTo", (*Map).BackupTo},
	{"Backup", func(m *Map, dest string) (BackupInfo, error) {
		var b bytes.Buffer
		info, err := m.Backup(&b)
		if err != nil {
			return info, err
		}
		if int64(b.Len()) != info.FileSize {
			return info, fmt.Errorf("Backup wrote %d bytes, BackupInfo.FileSize is %d", b.Len(), info.FileSize)
		}
		return info, os.WriteFile(dest, b.Bytes(), 0o600)
	}},
}

// TestBackupUnderTransfers takes backups, each way, while four processes
// make transfers: each backup holds, for every process, exactly a prefix
// of its transfers (the state at one instant), and the exact total.
func TestBackupUnderTransfers(t *testing.T) {
	for _, way := range backupWays {
		t.Run(way.name, func(t *testing.T) { testBackupUnderTransfers(t, way.to) })
	}
}

func testBackupUnderTransfers(t *testing.T, backup func(m *Map, dest string) (BackupInfo, error)) {
	const procs = 4
	n := 4000
	if testing.Short() || raceEnabled {
		n = 1500
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "accounts.map")
	m, err := Open(p, transferOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	seedAccounts(t, m)

	cmds := make([]*childProc, procs)
	for c := range procs {
		cmds[c] = startChild(t, "transfers", "MAP="+p, "C="+strconv.Itoa(c), "N="+strconv.Itoa(n))
	}
	var backups []string
	var infos []BackupInfo
	// Back up every few hundred transfers while the processes run.
	made := func() (sum int) {
		for c := range procs {
			if v, err := m.Get(txCountKey(c)); err == nil {
				sum += int(i64(v))
			}
		}
		return sum
	}
	deadline := time.Now().Add(2 * time.Minute)
	last := 0
	for len(backups) < 12 && !allExited(cmds) {
		if time.Now().After(deadline) {
			t.Fatal("the transfers take too long")
		}
		if made() < last+200 {
			time.Sleep(time.Millisecond)
			continue
		}
		last = made()
		marker := fmt.Appendf(nil, "marker-%d", len(backups))
		if err := m.Put(marker, s64(int64(len(backups)))); err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(dir, fmt.Sprintf("backup-%d.map", len(backups)))
		info, err := backup(m, dest)
		if err != nil {
			t.Fatal(err)
		}
		backups, infos = append(backups, dest), append(infos, info)
	}
	for c, cmd := range cmds {
		if err := cmd.wait(); err != nil {
			t.Fatalf("process %d: %v", c, err)
		}
	}
	if len(backups) < 2 {
		t.Fatalf("only %d backups were taken while the transfers ran", len(backups))
	}
	var prev []int
	mid := 0
	for i, b := range backups {
		// Markers are Puts made before the backup: present, and no later one.
		bm, err := Open(b, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := bm.Get(fmt.Appendf(nil, "marker-%d", i)); err != nil || i64(v) != int64(i) {
			t.Fatalf("backup %d lacks the Put made before it: %v %v", i, v, err)
		}
		if _, err := bm.Get(fmt.Appendf(nil, "marker-%d", i+1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("backup %d holds a Put made after it: %v", i, err)
		}
		if bm.Len() != infos[i].Entries {
			t.Fatalf("backup %d: %d entries, BackupInfo says %d", i, bm.Len(), infos[i].Entries)
		}
		bm.Close()
		// Markers are not transfers: checkTransfers counts entries
		// without them, so take them out of a writable copy.
		counts := checkBackupTransfers(t, b, procs, i+1)
		for c := range counts {
			if prev != nil && counts[c] < prev[c] {
				t.Fatalf("backup %d holds fewer transfers of process %d than the one before: %v then %v", i, c, prev, counts)
			}
			if counts[c] > 0 && counts[c] < n {
				mid++
			}
		}
		prev = counts
	}
	if mid == 0 {
		t.Fatal("no backup was taken in the middle of a process's transfers")
	}
	final := checkBackupTransfers(t, p, procs, len(backups))
	for c := range final {
		if final[c] != n {
			t.Fatalf("the source holds %v transfers, want %d each", final, n)
		}
	}
}

// checkBackupTransfers is checkTransfers for a map that also holds
// markers markers: they are deleted from a copy first.
func checkBackupTransfers(t *testing.T, path string, procs, markers int) []int {
	t.Helper()
	cp := path + ".check"
	os.Remove(cp)
	m, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.BackupTo(cp); err != nil {
		t.Fatal(err)
	}
	m.Close()
	c, err := Open(cp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range markers {
		c.Delete(fmt.Appendf(nil, "marker-%d", i))
	}
	c.Close()
	return checkTransfers(t, cp, procs)
}

// TestBackupKilled kills a backing-up process at its steps and at random
// instants while transfers run: the source stays sound with its total,
// its writers carry on (taking the dead backup's locks over), and DEST
// is either absent or a whole backup.
var takenOver = regexp.MustCompile(`^segment \d+: lock held by a dead process$`)

func TestBackupKilled(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "accounts.map")
	m, err := Open(p, transferOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	seedAccounts(t, m)
	// Enough entries that a backup takes a while to kill it inside.
	pre := 20000
	if raceEnabled {
		pre = 5000
	}
	for k := 1; k <= pre; k++ {
		if err := backupTransfer(m, 0, k); err != nil {
			t.Fatal(err)
		}
	}
	var next atomic.Int64
	next.Store(int64(pre) + 1)
	runs := []string{"backup.locking", "backup.locked", "backup.filling"}
	random := 6
	if testing.Short() {
		random = 3
	}
	for range random {
		runs = append(runs, "")
	}
	for i, step := range runs {
		dest := filepath.Join(dir, fmt.Sprintf("dest-%d.map", i))
		cmd := startChild(t, "backup", "MAP="+p, "DEST="+dest, "KILL_AT="+step)
		cmd.waitLine(t, "opened")
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			// Transfers meanwhile, from this process.
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				if err := backupTransfer(m, 0, int(next.Load())); err != nil {
					done <- err
					return
				}
				next.Add(1)
			}
		}()
		if step == "" {
			time.Sleep(time.Duration(rand.IntN(40000)) * time.Microsecond)
			reexec.Kill(cmd.cmd.Process)
		}
		err := cmd.wait()
		killed := reexec.Killed(err)
		if err != nil && !killed {
			t.Fatalf("run %d (%q): %v", i, step, err)
		}
		// The writers carry on past the dead holder's locks.
		deadline := time.Now().Add(10 * time.Second)
		for at := next.Load(); next.Load() < at+50; {
			if time.Now().After(deadline) {
				t.Fatalf("run %d (%q): transfers stalled after the backup was killed", i, step)
			}
			time.Sleep(time.Millisecond)
		}
		close(stop)
		if err := <-done; err != nil {
			t.Fatalf("run %d (%q): transfer: %v", i, step, err)
		}
		_, statErr := os.Lstat(dest)
		switch {
		case killed && step != "" && statErr == nil:
			t.Fatalf("run %d: killed at %s, yet %s exists", i, step, dest)
		case statErr == nil:
			checkTransfers(t, dest, 1) // finished before the kill: a whole backup
		case !killed:
			t.Fatalf("run %d: the backup finished but %s is missing: %v", i, dest, statErr)
		}
		if step != "" && !killed {
			t.Fatalf("run %d: the backup was not killed at %s", i, step)
		}
		// Nothing half-written in the directory under any name, but for
		// the portable build's temporary name (no O_TMPFILE there: a
		// process killed while it builds a file leaves .NAME.creating-*,
		// docs/PLATFORMS.md), which is never a final name.
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			name := e.Name()
			if shm.Portable && strings.HasPrefix(name, ".dest-") && strings.Contains(name, ".map.creating-") {
				continue
			}
			var j int
			if _, err := fmt.Sscanf(name, "dest-%d.map", &j); name != "accounts.map" && (err != nil || name != fmt.Sprintf("dest-%d.map", j)) {
				t.Fatalf("run %d: %s left behind", i, name)
			}
		}
		// A segment no transfer touched since the kill may still be
		// locked by the dead backup, which Check reports: Recover takes
		// such locks over, and must find nothing else to repair (the
		// backup only reads).
		fixed, err := m.Recover()
		if err != nil {
			t.Fatalf("run %d: recover: %v", i, err)
		}
		for _, f := range fixed {
			if !takenOver.MatchString(f) {
				t.Fatalf("run %d: recover after the killed backup: %q", i, f)
			}
		}
		got := checkTransfers(t, p, 1)
		if got[0] != int(next.Load())-1 {
			t.Fatalf("run %d: the source holds %d transfers, %d were made", i, got[0], next.Load()-1)
		}
	}
}

func TestBackupErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.map")
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	exists := filepath.Join(dir, "exists")
	os.WriteFile(exists, []byte("x"), 0o600)
	if _, err := m.BackupTo(exists); !errors.Is(err, os.ErrExist) {
		t.Fatalf("backup over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(exists); string(b) != "x" {
		t.Fatalf("the existing file was changed: %q", b)
	}
	if _, err := m.BackupTo(filepath.Join(dir, "no", "such", "dir.map")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup into a missing directory: %v", err)
	}
	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.BackupTo(filepath.Join(dir, "ro.map")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("backup of a read-only map: %v", err)
	}
	ro.Close()
	if _, err := os.Lstat(filepath.Join(dir, "ro.map")); err == nil {
		t.Fatal("a refused backup left a file")
	}
	m.Close()
	if _, err := m.BackupTo(filepath.Join(dir, "closed.map")); !errors.Is(err, ErrClosed) {
		t.Fatalf("backup of a closed map: %v", err)
	}
}

// TestBackupKinds: checksums, expiry (times kept, expired entries left
// out), sets, the file's permission, and a map that grew.
func TestBackupKinds(t *testing.T) {
	dir := t.TempDir()
	t.Run("checksums-expiry", func(t *testing.T) {
		p := filepath.Join(dir, "ttl.map")
		m, err := Open(p, Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8, ChecksumEntries: true, TTL: time.Hour, FileMode: 0o640})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		later := time.Now().Add(10 * time.Minute).Truncate(time.Nanosecond)
		for i := range 500 { // past Entries: it grew
			mustPut(t, m, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
		}
		if err := m.PutExpiring([]byte("soon"), []byte("x"), later); err != nil {
			t.Fatal(err)
		}
		if err := m.PutExpiring([]byte("never"), []byte("x"), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := m.PutExpiring([]byte("gone"), []byte("x"), time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(dir, "ttl.bak")
		info, err := m.BackupTo(dest)
		if err != nil {
			t.Fatal(err)
		}
		if info.Entries != 502 {
			t.Fatalf("%d entries backed up, want 502", info.Entries)
		}
		fi, err := os.Stat(dest)
		wantPerm := os.FileMode(0o640)
		if runtime.GOOS == "windows" {
			wantPerm = 0o666 // no Unix modes: Go shows a file without the read-only attribute so
		}
		if err != nil || fi.Mode().Perm() != wantPerm || fi.Size() != info.FileSize {
			t.Fatalf("backup file: %v %v (info %d)", fi, err, info.FileSize)
		}
		b, err := Open(dest, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Check(); err != nil {
			t.Fatal(err)
		}
		st := b.Stats()
		if !st.ChecksumEntries || st.TTL != time.Hour || b.Len() != 502 {
			t.Fatalf("backup stats %+v, len %d", st, b.Len())
		}
		for i := range 500 {
			if v, err := b.Get(fmt.Appendf(nil, "k%d", i)); err != nil || string(v) != fmt.Sprintf("v%d", i) {
				t.Fatalf("k%d: %q %v", i, v, err)
			}
		}
		// The expiry times are the source's: not restarted by the copy.
		if got := expiryOf(t, b, []byte("soon")); got != later.UnixNano() {
			t.Fatalf("soon expires at %d, want %d", got, later.UnixNano())
		}
		if got := expiryOf(t, b, []byte("never")); got != 0 {
			t.Fatalf("never expires at %d", got)
		}
		if x := expiryOf(t, b, []byte("k1")); x != expiryOf(t, m, []byte("k1")) {
			t.Fatalf("k1 expires at %d in the backup, %d in the source", x, expiryOf(t, m, []byte("k1")))
		}
		if ok, _ := b.Has([]byte("gone")); ok {
			t.Fatal("an expired entry was backed up")
		}
	})
	t.Run("set", func(t *testing.T) {
		s, err := OpenSet(filepath.Join(dir, "s.set"), Options{Entries: 100, AverageKeySize: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range 300 {
			s.Add(fmt.Appendf(nil, "m%d", i))
		}
		dest := filepath.Join(dir, "s.bak")
		if _, err := s.Map().BackupTo(dest); err != nil {
			t.Fatal(err)
		}
		b, err := OpenSet(dest, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.Len() != 300 {
			t.Fatalf("%d members", b.Len())
		}
		for i := range 300 {
			if ok, err := b.Has(fmt.Appendf(nil, "m%d", i)); !ok || err != nil {
				t.Fatalf("m%d: %v %v", i, ok, err)
			}
		}
	})
}

// expiryOf is the expiry time of key's entry in m.
func expiryOf(t *testing.T, m *Map, key []byte) int64 {
	t.Helper()
	h := m.hash(key)
	s := m.segment(h.seg)
	_, _, e, ok, _ := m.find(&s, key, h)
	if !ok {
		t.Fatalf("%s not found", key)
	}
	return i64(s.mem[m.expOff(e) : m.expOff(e)+8])
}

// childProc is a helper process whose output the test reads.
type childProc struct {
	cmd   *exec.Cmd
	lines chan string
	out   strings.Builder
	mu    sync.Mutex
	done  chan struct{}
	err   error
}

func startChild(t *testing.T, role string, env ...string) *childProc {
	t.Helper()
	c := &childProc{cmd: child(t, role, env...), lines: make(chan string, 16), done: make(chan struct{})}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &lockedWriter{c}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

type lockedWriter struct{ c *childProc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.out.Write(b)
}

// waitLine waits for the child to print line.
func (c *childProc) waitLine(t *testing.T, line string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if l == line {
				return
			}
		case <-c.done:
			t.Fatalf("the child ended before printing %q: %v\n%s", line, c.err, c.stderr())
		case <-timeout:
			t.Fatalf("the child did not print %q", line)
		}
	}
}

func (c *childProc) stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// wait waits for the child to end and returns its error, with its stderr.
func (c *childProc) wait() error {
	<-c.done
	if c.err != nil {
		return fmt.Errorf("%w\n%s", c.err, c.stderr())
	}
	return nil
}

func allExited(cs []*childProc) bool {
	for _, c := range cs {
		select {
		case <-c.done:
		default:
			return false
		}
	}
	return true
}

func s64(n int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }

// TestBackupReadersDoNotWait holds a backup at its instant (every segment
// lock held): Get, ViewKeys and Range answer meanwhile, and a Put waits
// until the backup lets its segment go, and is not in the copy.
func TestBackupReadersDoNotWait(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(filepath.Join(dir, "a.map"), Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8, Segments: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 100 {
		mustPut(t, m, fmt.Appendf(nil, "k%d", i), []byte("old"))
	}
	held, release := make(chan struct{}), make(chan struct{})
	crashPoint = func(s string) {
		if s == "backup.locked" {
			close(held)
			<-release
		}
	}
	defer func() { crashPoint = nil }()
	done := make(chan error, 1)
	go func() {
		_, err := m.BackupTo(filepath.Join(dir, "b.map"))
		done <- err
	}()
	<-held
	if v, err := m.Get([]byte("k1")); err != nil || string(v) != "old" {
		t.Fatalf("Get during the backup: %q %v", v, err)
	}
	if err := m.ViewKeys([][]byte{[]byte("k1"), []byte("k2")}, func(v [][]byte, found []bool) {}); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := m.Range(func(k, v []byte) bool { n++; return true }); err != nil || n != 100 {
		t.Fatalf("Range during the backup: %d entries, %v", n, err)
	}
	put := make(chan error, 1)
	go func() { put <- m.Put([]byte("k1"), []byte("new")) }()
	select {
	case err := <-put:
		t.Fatalf("a Put returned (%v) while the backup held every segment lock", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, "b.map"), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if v, err := b.Get([]byte("k1")); err != nil || string(v) != "old" {
		t.Fatalf("the copy holds k1 = %q (%v): a Put made after its instant", v, err)
	}
}
