package queue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/isolate"
	"github.com/offmap/offmap/internal/reexec"
)

// The liveness tests run an appender and a tailer in the views of the
// system that containers and hardened hosts give them (internal/isolate):
// a tailer must never skip the message of a live appender that is slow to
// commit, whatever the appender's pid namespace, uid or /proc.

const livenessHelperEnv = "OFFQUEUE_LIVENESS_HELPER"

// livenessSkipAfter is the tailers' SkipAfter here: short, so that a
// tailer that took a live appender for dead would skip its message at
// once.
const livenessSkipAfter = 10 * time.Millisecond

func init() {
	role := os.Getenv(livenessHelperEnv)
	if role == "" {
		return
	}
	err := isolate.Enter()
	if err == nil {
		err = livenessHelper(role, os.Getenv("OFFQUEUE_DIR"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// livenessHelper runs one role on the queue in dir:
//   - reserve-pause reserves a message, writes "m1" into it, says
//     "reserved", and commits it only when a line arrives on stdin; then
//     appends "m2" and "end".
//   - tail-print says "tailing", then prints every message from the start
//     of the queue, one a line, up to "end".
func livenessHelper(role, dir string) error {
	q, err := Open(dir, Options{FileMode: 0o666, SkipAfter: livenessSkipAfter})
	if err != nil {
		return err
	}
	defer q.Close()
	switch role {
	case "reserve-pause":
		w, err := q.Reserve(2)
		if err != nil {
			return err
		}
		copy(w.Bytes(), "m1")
		fmt.Println("reserved")
		bufio.NewReader(os.Stdin).ReadString('\n')
		if _, err := w.Commit(); err != nil {
			return err
		}
		for _, m := range []string{"m2", "end"} {
			if _, err := q.Append([]byte(m)); err != nil {
				return err
			}
		}
	case "tail-print":
		t, err := q.Tailer()
		if err != nil {
			return err
		}
		fmt.Println("tailing")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for {
			if err := t.Wait(ctx, Park); err != nil {
				return err
			}
			_, msg, err := t.Next()
			if errors.Is(err, ErrNoMessage) {
				continue
			}
			if err != nil {
				return err
			}
			fmt.Printf("%s\n", msg)
			if string(msg) == "end" {
				return nil
			}
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

func livenessProc(t *testing.T, v isolate.View, role, dir, want string) (*bufio.Reader, io.WriteCloser, func() error) {
	t.Helper()
	cmd := reexec.Command("-test.run=^$")
	cmd.Env = append(os.Environ(), livenessHelperEnv+"="+role, "OFFQUEUE_DIR="+dir)
	stdin, out := isolate.Start(t, cmd, v, want)
	return out, stdin, cmd.Wait
}

// TestLivenessSlowAppenderAcrossViews: an appender in one view reserves a
// message and holds it uncommitted for far longer than SkipAfter; a tailer
// in another view, stalled at it all that time, must neither skip it nor
// lose it: it reads m1, m2, end. From the host, the appender's lease is
// listed among the live writers meanwhile.
func TestLivenessSlowAppenderAcrossViews(t *testing.T) {
	isolate.Require(t)
	host := isolate.View{}
	pidns := isolate.View{PIDNamespace: true, Proc: "own"}
	for _, c := range []struct {
		name             string
		appender, tailer isolate.View
	}{
		{"appender in a pid namespace", pidns, host},
		{"tailer in a pid namespace", host, pidns},
		{"appender with an empty /proc", isolate.View{Proc: "empty"}, host},
		{"appender of another uid with an empty /proc", isolate.View{Proc: "empty", UID: 1000}, host},
		{"hidepid, two uids", isolate.View{Proc: "hidepid", UID: 1000}, isolate.View{Proc: "hidepid", UID: 1001}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			dir := filepath.Join(isolate.SharedDir(t), "q")
			q, err := Open(dir, Options{FileMode: 0o666})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			tail, _, tailDone := livenessProc(t, c.tailer, "tail-print", dir, "tailing")
			_, release, appendDone := livenessProc(t, c.appender, "reserve-pause", dir, "reserved")
			st, err := q.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Writers) != 1 {
				t.Errorf("live writers seen from the host: %v, want the appender's", st.Writers)
			}
			// The tailer now waits at the reserved message; a tailer that
			// judged its appender dead would skip it within SkipAfter.
			time.Sleep(30 * livenessSkipAfter)
			io.WriteString(release, "commit\n")
			if err := appendDone(); err != nil {
				t.Fatalf("appender: %v", err)
			}
			var got []string
			for {
				line, err := tail.ReadString('\n')
				if err != nil {
					break
				}
				got = append(got, strings.TrimSuffix(line, "\n"))
			}
			if err := tailDone(); err != nil {
				t.Errorf("tailer: %v", err)
			}
			if strings.Join(got, " ") != "m1 m2 end" {
				t.Fatalf("the tailer read %q, want m1 m2 end", got)
			}
		})
	}
}
