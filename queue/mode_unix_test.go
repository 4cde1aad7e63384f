//go:build unix

package queue

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileMode: queue files are created 0600 by default, as map files are,
// or with Options.FileMode.
func TestFileMode(t *testing.T) {
	for _, c := range []struct{ opt, want os.FileMode }{{0, 0o600}, {0o640, 0o640}} {
		dir := t.TempDir()
		old := syscall.Umask(0)
		q := openT(t, dir, Options{FileMode: c.opt})
		q.Append([]byte("x"))
		syscall.Umask(old)
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) != 2 {
			t.Fatalf("files %v", files)
		}
		for _, f := range files {
			if st, err := os.Stat(f); err != nil || st.Mode().Perm() != c.want {
				t.Fatalf("FileMode %o: %s has mode %v, want %o", c.opt, f, st.Mode().Perm(), c.want)
			}
		}
	}
}
