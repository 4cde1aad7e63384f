//go:build linux

// Package isolate starts a test's helper processes in the views of the
// system that containers and hardened hosts give the processes sharing a
// file: a pid namespace of their own (containers without --pid=host), a
// /proc that hides other users' processes (hidepid=2, systemd's
// ProtectProc=invisible), an empty /proc (a chroot), another uid. The
// liveness tests of the map and the queue run their processes in these
// views and check that a live lock holder is never taken for dead.
//
// It needs root; Require skips a test otherwise. Every mount is made in
// the helper's own mount namespace, and nothing outside it changes.
package isolate

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/offmap/offmap/internal/reexec"
	"golang.org/x/sys/unix"
)

// View is how a helper process sees the system.
type View struct {
	// PIDNamespace gives the process a pid namespace of its own, in which
	// it is pid 1.
	PIDNamespace bool
	// Proc is what its /proc shows: "" leaves the mount as it is (in a
	// new pid namespace, the host's processes, its own pid naming
	// another), "own" mounts a /proc of its pid namespace, "hidepid"
	// mounts one with hidepid=2 (only its own user's processes), "empty"
	// an empty tmpfs.
	Proc string
	// UID, when not zero, is the uid and gid the process runs as, after
	// the mounts.
	UID int
}

func (v View) String() string {
	var parts []string
	if v.PIDNamespace {
		parts = append(parts, "pidns")
	}
	if v.Proc != "" {
		parts = append(parts, "proc="+v.Proc)
	}
	if v.UID != 0 {
		parts = append(parts, "uid="+strconv.Itoa(v.UID))
	}
	if len(parts) == 0 {
		return "host"
	}
	return strings.Join(parts, ",")
}

const envName = "OFFMAP_ISOLATE"

// Apply sets cmd, a helper of this test binary, to start in view v; the
// helper must call Enter first thing.
func Apply(cmd *exec.Cmd, v View) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if v.PIDNamespace {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWPID
	}
	if v.Proc != "" {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNS
	}
	cmd.Env = append(cmd.Env, envName+"="+v.encode())
}

func (v View) encode() string {
	pidns := 0
	if v.PIDNamespace {
		pidns = 1
	}
	return fmt.Sprintf("%d:%s:%d", pidns, v.Proc, v.UID)
}

// Enter makes the mounts and takes the uid that the helper's view names,
// if it has one. A helper that fails to enter its view must not go on.
func Enter() error {
	s := os.Getenv(envName)
	if s == "" {
		return nil
	}
	os.Unsetenv(envName) // not for the helper's own helpers
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return fmt.Errorf("isolate: bad %s %q", envName, s)
	}
	uid, _ := strconv.Atoi(f[2])
	if proc := f[1]; proc != "" {
		// Mounts made from here on stay in this mount namespace.
		if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("isolate: make mounts private: %w", err)
		}
		var err error
		const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
		switch proc {
		case "own":
			err = unix.Mount("proc", "/proc", "proc", flags, "")
		case "hidepid":
			err = unix.Mount("proc", "/proc", "proc", flags, "hidepid=2")
		case "empty":
			err = unix.Mount("tmpfs", "/proc", "tmpfs", flags, "size=64k")
		default:
			err = fmt.Errorf("unknown view of /proc %q", proc)
		}
		if err != nil {
			return fmt.Errorf("isolate: mount /proc (%s): %w", proc, err)
		}
	}
	if uid != 0 {
		// The syscall package changes the ids of every thread.
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("isolate: setgroups: %w", err)
		}
		if err := syscall.Setresgid(uid, uid, uid); err != nil {
			return fmt.Errorf("isolate: setresgid %d: %w", uid, err)
		}
		if err := syscall.Setresuid(uid, uid, uid); err != nil {
			return fmt.Errorf("isolate: setresuid %d: %w", uid, err)
		}
	}
	return nil
}

// Require skips t unless this process can start helpers in new pid and
// mount namespaces and give them other uids: it must be root, on a kernel
// and in a sandbox that allow namespaces, and not under an emulator.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: starts helpers in pid and mount namespaces and as other uids")
	}
	if reexec.Emulated() {
		t.Skip("namespaces are the kernel's, not the architecture's: not tested under an emulator")
	}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS}
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot start a process in new pid and mount namespaces: %v", err)
	}
}

// SharedDir returns a new directory that every uid may enter and write,
// for the files the helpers share.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; ; {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		parent := d[:strings.LastIndexByte(d, '/')]
		if !strings.HasPrefix(parent, os.TempDir()) || parent == os.TempDir() {
			return dir
		}
		d = parent
	}
}

// Start starts cmd, a helper of this test binary, in view v, and returns
// its stdin and stdout once it has said its first line, want. The helper
// is killed when the test ends; its stderr goes to this process's.
func Start(t testing.TB, cmd *exec.Cmd, v View, want string) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	Apply(cmd, v)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v in view %v: %v", cmd.Args, v, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(stdout)
	if line, _ := out.ReadString('\n'); line != want+"\n" {
		t.Fatalf("helper in view %v said %q, want %q", v, line, want)
	}
	return stdin, out
}
