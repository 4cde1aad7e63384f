//go:build !linux

package testfs

import "testing"

// Elsewhere than Linux the tests that need a file system of their own are
// skipped (as is the build of the library itself, for now).

func Tmpfs(t *testing.T, size int64) (string, bool) {
	t.Skip("tmpfs mounts: Linux only")
	return "", false
}
func ReadOnly(t testing.TB, dir string)        { t.Skip("tmpfs mounts: Linux only") }
func Fill(t testing.TB, dir string) func()     { t.Skip("tmpfs mounts: Linux only"); return nil }
func SparseCopy(t testing.TB, src, dst string) { t.Skip("sparse copies: Linux only") }
func Fifo(t testing.TB, path string)           { t.Skip("FIFOs: Linux only") }
