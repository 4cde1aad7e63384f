package queue

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/testfs"
)

// What a hostile or unusual file system gives the queue: FIFOs in place of
// its files, a sparse copy on a full disk, a read-only mount.

// twoCycles makes a queue in dir with n messages in each of two cycles.
func twoCycles(t *testing.T, dir string, n int) {
	clk := newClock()
	q, err := Open(dir, Options{Roll: Minutely, clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for c := range 2 {
		for i := range n {
			if _, err := q.Append(msgOf(c*n + i)); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Minute)
	}
}

// readThrough reads a queue from the start and returns how many messages
// it read and the error that stopped it, if not the end.
func readThrough(dir string, ro bool) (int, error) {
	q, err := Open(dir, Options{ReadOnly: ro})
	if err != nil {
		return 0, err
	}
	defer q.Close()
	tl, err := q.Tailer()
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		_, m, err := tl.Next()
		if err == ErrNoMessage {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if string(m) != string(msgOf(n)) {
			return n, errors.New("message " + string(m) + " out of place")
		}
		n++
	}
}

func TestFifoInPlaceOfQueueFiles(t *testing.T) {
	dir := t.TempDir()
	testfs.Fifo(t, filepath.Join(dir, metaName))
	for _, ro := range []bool{false, true} {
		err := testfs.ReturnsSoon(t, "Open with a FIFO as queue.meta", func() error {
			q, err := Open(dir, Options{ReadOnly: ro})
			if err == nil {
				q.Close()
			}
			return err
		})
		if !errors.Is(err, ErrForeign) {
			t.Fatalf("Open(ReadOnly: %v) with a FIFO as %s: %v, want ErrForeign", ro, metaName, err)
		}
	}

	dir = t.TempDir()
	twoCycles(t, dir, 10)
	cs, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, e := range cs {
		if filepath.Ext(e.Name()) == cycleSuffix {
			last = filepath.Join(dir, e.Name())
		}
	}
	os.Remove(last)
	testfs.Fifo(t, last)
	for _, ro := range []bool{false, true} {
		var n int
		err := testfs.ReturnsSoon(t, "reading a queue whose second cycle is a FIFO", func() (err error) {
			n, err = readThrough(dir, ro)
			return err
		})
		if n != 10 || !errors.Is(err, ErrForeign) {
			t.Fatalf("ReadOnly: %v: read %d messages, then %v; want 10 and ErrForeign", ro, n, err)
		}
	}
}

// TestSparseCopyOnFullDisk reads and appends to a sparse copy of a queue
// on a full file system: a page fault on a hole raised SIGBUS. Open must
// fill the holes or refuse with ErrSparse, and lose nothing.
func TestSparseCopyOnFullDisk(t *testing.T) {
	fs, ok := testfs.Tmpfs(t, 16<<20)
	if !ok {
		return
	}
	src := t.TempDir()
	twoCycles(t, src, 50)
	dir := filepath.Join(fs, "q")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		testfs.SparseCopy(t, filepath.Join(src, e.Name()), filepath.Join(dir, e.Name()))
	}
	free := testfs.Fill(t, fs)
	for _, ro := range []bool{false, true} {
		n, err := readThrough(dir, ro)
		if !errors.Is(err, ErrSparse) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("ReadOnly: %v: read %d messages, then %v; want ErrSparse and ENOSPC", ro, n, err)
		}
	}
	free()
	q := openT(t, dir, Options{})
	if _, err := q.Append(msgOf(100)); err != nil {
		t.Fatal(err)
	}
	if n, err := readThrough(dir, true); n != 101 || err != nil {
		t.Fatalf("read %d messages, then %v; want 101", n, err)
	}
}

// TestReadOnlyFileSystem: on a read-only mount the queue opens read-only
// when ReadOnly was not asked for, as the map does.
func TestReadOnlyFileSystem(t *testing.T) {
	dir, ok := testfs.Tmpfs(t, 16<<20)
	if !ok {
		return
	}
	twoCycles(t, dir, 5)
	testfs.ReadOnly(t, dir)
	q := openT(t, dir, Options{})
	if !q.ReadOnly() {
		t.Fatal("queue on a read-only file system is not read-only")
	}
	if _, err := q.Append([]byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append: %v, want ErrReadOnly", err)
	}
	if n, err := readThrough(dir, false); n != 10 || err != nil {
		t.Fatalf("read %d messages, then %v; want 10", n, err)
	}
}

// TestNamedTailerUnknownReadOnly: a read-only queue cannot add a name, and
// an anonymous tailer in its place would acknowledge nothing.
func TestNamedTailerUnknownReadOnly(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{})
	q.Append([]byte("x"))
	if _, err := q.NamedTailer("known"); err != nil {
		t.Fatal(err)
	}
	ro := openT(t, dir, Options{ReadOnly: true})
	if _, err := ro.NamedTailer("unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NamedTailer of an unknown name on a read-only queue: %v, want ErrNotFound", err)
	}
	tl, err := ro.NamedTailer("known")
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Ack(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Ack on a read-only queue: %v, want ErrReadOnly", err)
	}
}

// TestAppendToUnwritableCycle: a writable queue whose cycle file this
// process can only open read-only (an immutable file, another user's
// file mode) refuses to append to it with ErrReadOnly; a store into the
// read-only mapping would kill the process.
func TestAppendToUnwritableCycle(t *testing.T) {
	dir := t.TempDir()
	q := openT(t, dir, Options{})
	q.Append([]byte("before"))
	q.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+cycleSuffix))
	setImmutable(t, files[0], true)
	defer setImmutable(t, files[0], false)

	q, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.ReadOnly() {
		t.Fatal("the queue opened read-only: the test would not reach the cycle file")
	}
	if _, err := q.Append([]byte("after")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append to an immutable cycle file: %v, want ErrReadOnly", err)
	}
	if n, err := readThroughQueue(q); n != 1 || err != nil {
		t.Fatalf("read %d messages, %v", n, err)
	}
}

// readThroughQueue counts the messages a new tailer of q reads.
func readThroughQueue(q *Queue) (int, error) {
	tl, err := q.Tailer()
	if err != nil {
		return 0, err
	}
	defer tl.Close()
	n := 0
	for {
		_, _, err := tl.Next()
		if err == ErrNoMessage {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}
