//go:build unix

package offmap_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/offmap/offmap/offmap"
)

// TestUpgradeOwner: the new file keeps the old one's owner and group,
// where this process may set them (as root).
func TestUpgradeOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root may give a file to another user")
	}
	path := v1File(t, nil)
	if err := os.Chown(path, 4321, 8765); err != nil {
		t.Fatal(err)
	}
	if _, err := offmap.Upgrade(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4321 || st.Gid != 8765 {
		t.Errorf("the upgraded file belongs to %d:%d, want 4321:8765", st.Uid, st.Gid)
	}
}
