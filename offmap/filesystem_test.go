//go:build unix

package offmap

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/offmap/offmap/internal/testfs"
	"golang.org/x/sys/unix"
)

// What a hostile or unusual file system gives the map: a FIFO in place of
// the file, a sparse copy on a full disk, a read-only mount.

func TestFifoRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo.map")
	testfs.Fifo(t, p)
	for _, ro := range []bool{false, true} {
		err := testfs.ReturnsSoon(t, "Open of a FIFO", func() error {
			m, err := Open(p, Options{ReadOnly: ro, Entries: 10, AverageKeySize: 4, AverageValueSize: 4})
			if err == nil {
				m.Close()
			}
			return err
		})
		if !errors.Is(err, ErrNotMap) {
			t.Fatalf("Open(ReadOnly: %v) of a FIFO: %v, want ErrNotMap", ro, err)
		}
	}
}

// TestSparseCopyOnFullDisk opens a sparse copy of a map on a full file
// system. A page fault on a hole needs a page the file system cannot
// give, which raised SIGBUS in Put and in a read-only Check; Open must
// fill the holes, or refuse with ErrSparse, and lose nothing.
func TestSparseCopyOnFullDisk(t *testing.T) {
	dir, ok := testfs.Tmpfs(t, 8<<20)
	if !ok {
		return
	}
	opts := Options{Entries: 20000, AverageKeySize: 12, AverageValueSize: 16}
	src := tempPath(t)
	m, err := Open(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		mustPut(t, m, key(i), val(i))
	}
	m.Close()

	p := filepath.Join(dir, "sparse.map")
	testfs.SparseCopy(t, src, p)
	free := testfs.Fill(t, dir)
	for _, ro := range []bool{false, true} {
		m, err := Open(p, Options{ReadOnly: ro})
		if !errors.Is(err, ErrSparse) || !errors.Is(err, syscall.ENOSPC) {
			if err == nil {
				m.Close()
			}
			t.Fatalf("Open(ReadOnly: %v) of a sparse copy on a full disk: %v, want ErrSparse and ENOSPC", ro, err)
		}
	}
	free()
	m, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	for i := range 100 {
		mustGet(t, m, key(i), string(val(i)))
	}
	for i := 100; i < 5000; i++ {
		mustPut(t, m, key(i), val(i))
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 < st.Size {
		t.Fatalf("%d of %d bytes have storage", st.Blocks*512, st.Size)
	}
}

// TestReadOnlyFileSystem: a map on a read-only mount opens read-only
// when ReadOnly was not asked for, as when the file is not writable.
func TestReadOnlyFileSystem(t *testing.T) {
	dir, ok := testfs.Tmpfs(t, 8<<20)
	if !ok {
		return
	}
	p := filepath.Join(dir, "ro.map")
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	h, _ := m.AcquireInt64([]byte("n"))
	h.Add(1)
	m.Close()
	testfs.ReadOnly(t, dir)
	ro, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	checkReadOnly(t, ro)
	if _, err := Open(filepath.Join(dir, "new.map"), small); err == nil {
		t.Fatal("created a map on a read-only file system")
	} else if !errors.Is(err, syscall.EROFS) {
		t.Fatalf("create on a read-only file system: %v", err)
	}
}
