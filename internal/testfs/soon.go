package testfs

import (
	"testing"
	"time"
)

// ReturnsSoon runs f and fails the test if it has not returned within a
// generous bound: what it guards against (open(2) of a FIFO waiting for a
// writer) would otherwise hang the test binary for good.
func ReturnsSoon(t testing.TB, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s has not returned after 20s", what)
		return nil
	}
}
