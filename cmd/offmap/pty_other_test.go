//go:build !linux

package main

import (
	"os"
	"testing"
)

// openPTY: the tests of terminal output open a Linux pseudo-terminal
// (/dev/ptmx, /dev/pts/N); elsewhere they are skipped.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Skip("pseudo-terminal tests: Linux only")
	return nil, nil
}
