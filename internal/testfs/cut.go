package testfs

import (
	"errors"
	"runtime"
	"syscall"
	"testing"
)

// errorUserMappedFile is Windows' ERROR_USER_MAPPED_FILE.
const errorUserMappedFile = syscall.Errno(1224)

// CutRefused takes the error of truncating a file that is mapped, and
// reports whether the system refused it, as Windows does: the loss that
// a truncation test makes cannot happen there. It fails the test on any
// other error, and on Windows if the cut was made.
func CutRefused(t testing.TB, err error) bool {
	t.Helper()
	if runtime.GOOS == "windows" {
		if !errors.Is(err, errorUserMappedFile) {
			t.Fatalf("truncating a mapped file: %v, want ERROR_USER_MAPPED_FILE", err)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
