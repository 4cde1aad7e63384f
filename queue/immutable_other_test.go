//go:build !linux

package queue

import "testing"

// setImmutable: the immutable flag of ext4 and xfs (chattr +i) is Linux's;
// the test that needs it is skipped elsewhere.
func setImmutable(t *testing.T, path string, on bool) {
	t.Skip("immutable files: Linux only")
}
