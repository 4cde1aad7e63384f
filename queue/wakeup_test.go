package queue

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/shm"
)

// noWaitvEnv, set in a helper process's environment, makes it wake
// through the fallback a kernel without FUTEX_WAITV gets.
const noWaitvEnv = "OFFMAP_TEST_NO_FUTEX_WAITV"

func init() {
	if os.Getenv(noWaitvEnv) == "1" {
		shm.DisableWaitv()
	}
}

// TestCrossProcessWakeWithoutWaitv: a helper process whose notifier has
// no FUTEX_WAITV (as on Linux before 5.16) says so in Stats, and an
// append here still wakes it, through its poll of the doorbell.
func TestCrossProcessWakeWithoutWaitv(t *testing.T) {
	defer failIfHung(20 * time.Second)()
	dir := t.TempDir()
	q := openT(t, dir, Options{Roll: Fast}) // as the helper opens it
	q.Append([]byte("old"))
	cmd := helperCmd(t, "wait-once-stats", dir)
	cmd.Env = append(cmd.Env, noWaitvEnv+"=1")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "wakeups polled each") {
		t.Fatalf("helper said %q, want its Stats.Wakeups to say it polls", sc.Text())
	}
	if !sc.Scan() || sc.Text() != "waiting" {
		t.Fatalf("helper said %q", sc.Text())
	}
	q.Append([]byte("new"))
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "got new") {
		t.Fatalf("helper said %q", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Stats(); err != nil || st.Wakeups != shm.WakeupMode() || shm.Portable != strings.Contains(st.Wakeups, "portable") {
		t.Errorf("this process's Stats.Wakeups %q, %v", st.Wakeups, err)
	}
}
