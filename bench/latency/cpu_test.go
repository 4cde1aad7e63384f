package latency

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

func burn(d time.Duration) {
	for end := Nanotime() + int64(d); Nanotime() < end; {
	}
}

// TestBurnHelper is the child process of TestCPUChild.
func TestBurnHelper(t *testing.T) {
	if os.Getenv("LATENCY_BURN") == "" {
		t.Skip("child process of TestCPUChild")
	}
	burn(300 * time.Millisecond)
	os.Stdout.WriteString("burnt\n")
	io.Copy(io.Discard, os.Stdin) // stay alive until the parent has measured
}

func TestCPUSelf(t *testing.T) {
	m, err := StartCPU()
	if err != nil {
		t.Fatal(err)
	}
	burn(200 * time.Millisecond)
	u, err := m.Read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", u)
	// Generous: a loaded machine may give the spinning thread little CPU.
	if u.SelfNanos < int64(20*time.Millisecond) || u.Percent <= 10 || u.Percent > 400 || u.Wall() < 200*time.Millisecond {
		t.Fatalf("usage %+v after spinning 200 ms", u)
	}
}

func TestCPUChild(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBurnHelper$")
	cmd.Env = append(os.Environ(), "LATENCY_BURN=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m, err := StartCPU(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "burnt\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	u, err := m.Read()
	if err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", u)
	if u.ListedNanos < int64(20*time.Millisecond) || u.ReapedNanos != 0 {
		t.Fatalf("usage %+v for a child spinning 300 ms", u)
	}
	// Reaped now: its whole life shows in RUSAGE_CHILDREN, and it is gone.
	if _, err := m.Read(); !errors.Is(err, ErrProcessGone) {
		t.Fatalf("Read after reaping: %v, want ErrProcessGone", err)
	}
}

func TestCPUNoSuchProcess(t *testing.T) {
	if _, err := StartCPU(1 << 30); !errors.Is(err, ErrProcessGone) {
		t.Fatalf("StartCPU(no such pid): %v", err)
	}
}
