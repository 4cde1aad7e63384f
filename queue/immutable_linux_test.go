package queue

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// setImmutable sets or clears a file's immutable flag (chattr +i), which
// even root cannot write through. It skips the test where that is not
// possible (no CAP_LINUX_IMMUTABLE, a file system without the flag).
func setImmutable(t *testing.T, path string, on bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("file flags: %v", err)
	}
	const immutable = 0x10 // FS_IMMUTABLE_FL
	if on {
		flags |= immutable
	} else {
		flags &^= immutable
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags); err != nil {
		if on {
			t.Skipf("cannot make %s immutable: %v", path, err)
		}
		t.Fatal(err)
	}
}
