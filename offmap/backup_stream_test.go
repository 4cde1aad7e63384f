package offmap

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// namesIn lists the names in dir.
func namesIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// openUnder lists this process's descriptors of files in dir, named or
// not (Linux: /proc/self/fd), and false where it cannot tell.
func openUnder(dir string) ([]string, bool) {
	if runtime.GOOS != "linux" {
		return nil, false // (a Windows program under Wine sees Linux's /proc, with Unix paths)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	var out []string
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, dir+string(filepath.Separator)) {
			out = append(out, l)
		}
	}
	return out, true
}

// TestBackupStream: the bytes Backup writes are a map file that Open
// uses and Check passes, compact, holding exactly the entries of a model
// of the map (after puts, overwrites and deletes, and growth), with
// BackupInfo right; the map's directory holds no new file afterwards,
// and no descriptor of one stays open.
func TestBackupStream(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.map")
	m, err := Open(p, Options{Entries: 200, AverageKeySize: 8, AverageValueSize: 16, MaxValueSize: 200, ChecksumEntries: true, Segments: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	model := map[string]string{}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 { // past Entries: it grows
		k := fmt.Sprintf("k%d", r.IntN(2000))
		if r.IntN(4) == 0 {
			if had, err := m.Delete([]byte(k)); err != nil {
				t.Fatal(err)
			} else if _, in := model[k]; had != in {
				t.Fatalf("Delete(%s) found it %v, the model %v", k, had, in)
			}
			delete(model, k)
			continue
		}
		v := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(150))
		mustPut(t, m, []byte(k), []byte(v))
		model[k] = v
	}
	before := namesIn(t, dir)
	var b bytes.Buffer
	info, err := m.Backup(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := namesIn(t, dir); !slices.Equal(got, before) {
		t.Fatalf("the map's directory held %v, now %v", before, got)
	}
	if open, ok := openUnder(dir); ok && (len(open) != 1 || open[0] != p) {
		t.Fatalf("open files in the map's directory after the backup: %v", open)
	}
	if info.Entries != len(model) || info.FileSize != int64(b.Len()) || info.At.IsZero() {
		t.Fatalf("BackupInfo %+v; %d entries, %d bytes written", info, len(model), b.Len())
	}
	restored := filepath.Join(t.TempDir(), "restored.map")
	if err := os.WriteFile(restored, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(restored, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := c.Range(func(k, v []byte) bool { got[string(k)] = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(model) || c.Len() != len(model) {
		t.Fatalf("the restored map holds %d entries (Len %d), the model %d", len(got), c.Len(), len(model))
	}
	for k, v := range model {
		if got[k] != v {
			t.Fatalf("%s: restored %q, want %q", k, got[k], v)
		}
	}
	if st := c.Stats(); !st.ChecksumEntries || st.UnusedBytes != 0 || st.Segments != 8 {
		t.Fatalf("restored stats: %+v", st)
	}
	// It is a working map: writes go in.
	mustPut(t, c, []byte("after"), []byte("restore"))
}

// errAfterWriter takes n bytes, then fails every write with err.
type errAfterWriter struct {
	n   int
	err error
}

func (w *errAfterWriter) Write(b []byte) (int, error) {
	if len(b) <= w.n {
		w.n -= len(b)
		return len(b), nil
	}
	k := w.n
	w.n = 0
	return k, w.err
}

// TestBackupWriterError: a writer that fails in the middle of the copy
// makes Backup return its error, wrapped, and leaves no file (nor an open
// descriptor of one) in the map's directory; the map is unchanged and a
// next backup works.
func TestBackupWriterError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.map")
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 500 {
		mustPut(t, m, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
	}
	before := namesIn(t, dir)
	errBroken := errors.New("broken pipe, as the test makes it")
	_, err = m.Backup(&errAfterWriter{n: 40000, err: errBroken})
	if !errors.Is(err, errBroken) {
		t.Fatalf("Backup into a failing writer: %v", err)
	}
	if !strings.Contains(err.Error(), p) {
		t.Fatalf("the error does not name the map: %v", err)
	}
	if got := namesIn(t, dir); !slices.Equal(got, before) {
		t.Fatalf("the map's directory held %v, now %v", before, got)
	}
	if open, ok := openUnder(dir); ok && (len(open) != 1 || open[0] != p) {
		t.Fatalf("open files in the map's directory after the failed backup: %v", open)
	}
	var b bytes.Buffer
	if info, err := m.Backup(&b); err != nil || info.Entries != 500 {
		t.Fatalf("the next backup: %+v %v", info, err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// blockingWriter blocks its first Write, having said so on started,
// until release is closed, then takes everything.
type blockingWriter struct {
	started, release chan struct{}
	buf              bytes.Buffer
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	if w.started != nil {
		close(w.started)
		w.started = nil
		<-w.release
	}
	return w.buf.Write(b)
}

// TestBackupSlowWriter: while Backup's writer is blocked (a pipe to a
// stalled gzip or ssh), the backup holds no segment lock: Puts into every
// segment and an UpdateKeys over all of them complete, and Close of
// another handle on the file does not wait either. The copy holds the
// map as it was before, none of those writes.
func TestBackupSlowWriter(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.map")
	m, err := Open(p, Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8, Segments: 4, LockTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 100 {
		mustPut(t, m, fmt.Appendf(nil, "k%d", i), []byte("old"))
	}
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	started := w.started
	done := make(chan error, 1)
	var info BackupInfo
	go func() {
		var err error
		info, err = m.Backup(w)
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("Backup returned (%v) before writing", err)
	}
	wrote := make(chan error, 1)
	go func() {
		for i := range 100 { // every segment, many times over
			if err := m.Put(fmt.Appendf(nil, "k%d", i), []byte("new")); err != nil {
				wrote <- err
				return
			}
		}
		keys := make([][]byte, 0, 100)
		for i := range 100 {
			keys = append(keys, fmt.Appendf(nil, "k%d", i))
		}
		wrote <- m.UpdateKeys(keys, func(v [][]byte, found []bool) ([][]byte, []Op) {
			ops := make([]Op, len(keys))
			for i := range ops {
				ops[i] = OpDelete
			}
			return make([][]byte, len(keys)), ops
		})
	}()
	// The backup is blocked for good: a writer waiting for a lock it held
	// would wait past this (the lock timeout is a minute).
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		close(w.release)
		t.Fatal("writers waited while Backup's writer was blocked: it holds a segment lock")
	}
	if m.Len() != 0 {
		t.Fatalf("%d entries after deleting all", m.Len())
	}
	select {
	case err := <-done:
		t.Fatalf("Backup returned (%v) while its writer was blocked", err)
	default:
	}
	close(w.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if info.Entries != 100 || int64(w.buf.Len()) != info.FileSize {
		t.Fatalf("BackupInfo %+v, %d bytes written", info, w.buf.Len())
	}
	restored := filepath.Join(t.TempDir(), "b.map")
	if err := os.WriteFile(restored, w.buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(restored, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 100 {
		if v, err := b.Get(fmt.Appendf(nil, "k%d", i)); err != nil || string(v) != "old" {
			t.Fatalf("k%d in the copy: %q %v", i, v, err)
		}
	}
}

// TestBackupStreamCloseDoesNotWait: Close of the map returns while
// Backup's writer is blocked (the copy is built and the map no longer
// needed), and the backup still completes.
func TestBackupStreamCloseDoesNotWait(t *testing.T) {
	m, err := Open(filepath.Join(t.TempDir(), "a.map"), small)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	started := w.started
	done := make(chan error, 1)
	go func() {
		_, err := m.Backup(w)
		done <- err
	}()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		close(w.release)
		t.Fatal("Close waited for Backup's blocked writer")
	}
	close(w.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.buf.Len() == 0 {
		t.Fatal("nothing written")
	}
}

// TestBackupStreamErrors: a closed map, a read-only one; and a map whose
// directory this process may not write to builds its copy in
// os.TempDir().
func TestBackupStreamErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.map")
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := ro.Backup(&b); !errors.Is(err, ErrReadOnly) || b.Len() != 0 {
		t.Fatalf("Backup of a read-only map: %v, %d bytes", err, b.Len())
	}
	ro.Close()
	if runtime.GOOS != "windows" && os.Getuid() != 0 { // root writes anywhere
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		info, err := m.Backup(&b)
		os.Chmod(dir, 0o700)
		if err != nil || info.Entries != 1 || int64(b.Len()) != info.FileSize {
			t.Fatalf("Backup of a map in a read-only directory: %+v %v", info, err)
		}
		if names := namesIn(t, tmp); len(names) != 0 {
			t.Fatalf("left in TMPDIR: %v", names)
		}
		b.Reset()
	}
	m.Close()
	if _, err := m.Backup(&b); !errors.Is(err, ErrClosed) || b.Len() != 0 {
		t.Fatalf("Backup of a closed map: %v, %d bytes", err, b.Len())
	}
}
