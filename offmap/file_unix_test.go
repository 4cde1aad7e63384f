//go:build unix

package offmap

// File modes, block counts and other users are Unix's.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/offmap/offmap/internal/reexec"
)

func TestFileModeAndPreallocation(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Blocks*512 < fi.Size() {
		t.Fatalf("file of %d bytes has only %d bytes of blocks: not preallocated", fi.Size(), st.Blocks*512)
	}
	p2 := filepath.Join(t.TempDir(), "shared.map")
	m2, err := Open(p2, Options{Entries: 10, AverageKeySize: 4, AverageValueSize: 4, FileMode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if fi, _ := os.Stat(p2); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", fi.Mode().Perm())
	}
}

func init() {
	children["readonly"] = func() error {
		ro, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer ro.Close()
		if !ro.ReadOnly() {
			return errors.New("opened read-write without write permission")
		}
		v, err := ro.Get([]byte("k"))
		if err != nil || string(v) != "v" {
			return fmt.Errorf("Get = %q, %v", v, err)
		}
		if err := ro.Put([]byte("k"), nil); !errors.Is(err, ErrReadOnly) {
			return fmt.Errorf("Put: %v", err)
		}
		return nil
	}
}

// TestReadOnlyAutomatic opens a file the process may not write: Open falls
// back to read-only. Root may write anything, so as root the opener runs
// as nobody in a child process. The map is large enough that parts of the
// file were reserved by fallocate and never written, which ext4 and xfs
// report as holes: the opener must still see the file as whole.
func TestReadOnlyAutomatic(t *testing.T) {
	dir, err := os.MkdirTemp("", "offmap-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "ro.map")
	m, err := Open(p, Options{Entries: 20000, AverageKeySize: 4, AverageValueSize: 4, FileMode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, m, []byte("k"), []byte("v"))
	m.Close()
	if os.Geteuid() != 0 {
		os.Chmod(p, 0o444)
		ro, err := Open(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if !ro.ReadOnly() {
			t.Fatal("not read-only")
		}
		return
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by other users", d)
		}
	}
	// The test binary sits in a private build directory: run a copy.
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "offmap.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := child(t, "readonly", "MAP="+p)
	if reexec.Emulated() {
		cmd.Args[1] = exe // the emulator's argument
	} else {
		cmd.Path, cmd.Args[0] = exe, exe
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
}
