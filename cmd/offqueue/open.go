package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/offmap/offmap/queue"
)

// mustExist fails with a one-line error unless dir is an existing
// directory. queue.Open creates a missing queue unless read-only;
// commands that read a queue check first, so that they never create one
// and say plainly what is missing.
func mustExist(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such directory", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is a file, not a queue directory", dir)
	}
	return nil
}

// openQueue opens the existing queue in dir read-only.
func openQueue(dir string) (*queue.Queue, error) {
	if err := mustExist(dir); err != nil {
		return nil, err
	}
	return queue.Open(dir, queue.Options{ReadOnly: true})
}

// openTail opens an existing queue (never creating one) and a tailer;
// read-write unless readOnly, when this process may.
func openTail(dir string, readOnly bool) (*queue.Queue, *queue.Tailer, error) {
	q, err := openQueue(dir)
	if err == nil && !readOnly {
		q.Close()
		q, err = queue.Open(dir, queue.Options{})
	}
	if err != nil {
		return nil, nil, err
	}
	t, err := q.Tailer()
	if err != nil {
		q.Close()
		return nil, nil, err
	}
	return q, t, nil
}

// isFileDamage reports whether err says that a queue file is not sound:
// empty, foreign, truncated, of another version, or corrupt.
func isFileDamage(err error) bool {
	for _, e := range []error{queue.ErrEmptyFile, queue.ErrForeign, queue.ErrTruncated, queue.ErrVersion, queue.ErrCorrupt} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
