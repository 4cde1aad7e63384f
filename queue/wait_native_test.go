//go:build linux && !offmap_portable

package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/shm"

	"golang.org/x/sys/unix"
)

// waitForWatcher waits until a thread of process pid sleeps in futex_waitv
// on n words, as /proc/PID/task/TID/syscall shows.
func waitForWatcher(t *testing.T, _ *Queue, pid, n int) {
	t.Helper()
	var w atomic.Uint32
	vec := []shm.Waitv{{}}
	vec[0].SetWord(&w, 1) // differs: a kernel with the call returns at once
	if err := shm.FutexWaitv(vec, time.Second); errors.Is(err, unix.ENOSYS) {
		// qemu-user 7.2, which CI runs linux/arm64 tests under, lacks
		// it: the notifier then polls, which the offmap_portable run
		// tests.
		t.Skip("no FUTEX_WAITV here: the notifier polls")
	}
	want := []string{strconv.Itoa(unix.SYS_FUTEX_WAITV), "0x" + strconv.FormatInt(int64(n), 16)}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
		for _, p := range tasks {
			b, _ := os.ReadFile(p)
			if f := strings.Fields(string(b)); len(f) > 2 && f[0] == want[0] && f[2] == want[1] {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no thread of process %d sleeps in futex_waitv on %d words", pid, n)
}
