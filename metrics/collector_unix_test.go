//go:build unix

package metrics

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offmap/offmap/offmap"
	"github.com/prometheus/client_golang/prometheus"
)

// TestTimeout: a map whose open waits (a process holds the file's
// exclusive lock, as one does while it recovers a map it opened alone)
// fails its collection with ErrTimeout after Collector.Timeout instead
// of holding the scrape.
func TestTimeout(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.map")
	m, err := offmap.Open(p, offmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // the open that waits goes on then
	c := NewCollector()
	c.Timeout = 200 * time.Millisecond
	c.AddMap(p)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	start := time.Now()
	_, err = reg.Gather()
	if !errors.Is(err, ErrTimeout) && !strings.Contains(fmt.Sprint(err), ErrTimeout.Error()) {
		t.Fatalf("Gather: %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Gather took %v", d)
	}
}
