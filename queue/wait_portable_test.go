//go:build darwin || windows || (linux && offmap_portable)

package queue

import (
	"testing"
	"time"
)

// waitForWatcher waits until process pid watches q's doorbell: it counts
// itself among the doorbell's sleepers before its notifier first looks.
// Without futexes the notifier polls, so from then on it sees any change
// of the doorbell within shm.PollMax.
func waitForWatcher(t *testing.T, q *Queue, pid, _ int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if q.sleepers.Load() > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d does not watch the doorbell", pid)
}
