package replica

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on the file at path (creating it),
// held until the file is closed or the process ends, however it ends: so
// that two replica processes never apply changes to one map. The lock is
// on a file beside the map, not the map itself, whose open file
// descriptions offmap locks for its own purposes. The file stays: removing
// it would let two processes lock two different files of one name.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked", ErrBusy, path)
		}
		return nil, fmt.Errorf("replica: locking %s: %w", path, err)
	}
	return f, nil
}
