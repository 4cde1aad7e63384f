//go:build linux

// Package testfs gives tests file systems of their own: a small tmpfs
// that a test can fill up or make read-only, to see what the map and the
// queue do on a full disk or a read-only mount. The mounts are made in a
// private mount namespace, in a child process that runs the test again,
// so that no other process on the machine ever sees them. Mounting needs
// root (CAP_SYS_ADMIN); without it the tests that need one are skipped.
package testfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/offmap/offmap/internal/reexec"
	"golang.org/x/sys/unix"
)

const inNamespace = "OFFMAP_TESTFS_NAMESPACE"

// Tmpfs mounts a tmpfs of size bytes on a new directory, unmounted when
// the test ends, and returns it with ok set. Called in the machine's own
// mount namespace, it runs the test again in a child process with a
// namespace of its own, fails the test if the child failed, and returns ok
// false: the caller returns at once.
func Tmpfs(t *testing.T, size int64) (dir string, ok bool) {
	t.Helper()
	if os.Getenv(inNamespace) == "" {
		runInNamespace(t)
		return "", false
	}
	dir = t.TempDir()
	opts := "size=" + strconv.FormatInt(size, 10) + ",mode=0755"
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount a tmpfs in a private mount namespace: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir, true
}

// runInNamespace runs the current test in a child process of this test
// binary with a mount namespace of its own (Go makes its mounts private,
// so nothing propagates back).
func runInNamespace(t *testing.T) {
	t.Helper()
	var parts []string
	for _, p := range strings.Split(t.Name(), "/") {
		parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
	}
	cmd := reexec.Command("-test.run="+strings.Join(parts, "/"), "-test.v")
	cmd.Env = append(os.Environ(), inNamespace+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil && errors.Is(err, syscall.EPERM):
		t.Skipf("cannot make a mount namespace (needs root): %v", err)
	case err != nil:
		t.Fatalf("in a private mount namespace: %v\n%s", err, out)
	case bytes.Contains(out, []byte("--- SKIP")):
		t.Skipf("skipped in a private mount namespace:\n%s", out)
	case !bytes.Contains(out, []byte("--- PASS")):
		t.Fatalf("in a private mount namespace the test did not run:\n%s", out)
	}
}

// ReadOnly remounts the tmpfs at dir read-only.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
}

// Fill writes a file in dir until the file system has no space left and
// returns a function that removes it.
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := bytes.Repeat([]byte{1}, 4096)
	for {
		_, err := f.Write(block)
		if errors.Is(err, unix.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// SparseCopy copies src to dst as cp --sparse=always does: pages of zeros
// become holes.
func SparseCopy(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(len(b))); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 4096)
	for off := 0; off < len(b); off += 4096 {
		page := b[off:min(off+4096, len(b))]
		if bytes.Equal(page, zero[:len(page)]) {
			continue
		}
		if _, err := f.WriteAt(page, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if hole, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE); err != nil || hole >= int64(len(b)) {
		t.Fatalf("copy of %s has no hole (at %d, %v)", src, hole, err)
	}
}

// Fifo makes a named pipe at path.
func Fifo(t testing.TB, path string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}
