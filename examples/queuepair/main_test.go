package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offmap/offmap/internal/reexec"
)

// TestMain runs main instead of the tests in the processes the tests
// start, so that they run the example as its users do.
func TestMain(m *testing.M) {
	if os.Getenv("QUEUEPAIR_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func command(args ...string) *exec.Cmd {
	cmd := reexec.Command(args...)
	cmd.Env = append(os.Environ(), "QUEUEPAIR_MAIN=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// runProducer runs a producer process to its end and returns what it says it
// appended, one message a line.
func runProducer(t *testing.T, dir string, n int) []string {
	t.Helper()
	out, err := command("produce", "-n", strconv.Itoa(n), "-every", "1ms", dir).Output()
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("the producer printed %d lines, want %d", len(lines), n)
	}
	return lines
}

// TestConsumerReadsWhatProducerWrote runs the two commands as two
// processes, as in two terminals: a consumer started first and left to
// run prints exactly the messages a producer appends, in order, and
// stops cleanly on Ctrl-C; a consumer started again later goes on after
// them, reading exactly what two producers appended meanwhile.
func TestConsumerReadsWhatProducerWrote(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders")

	consumer := command("consume", dir)
	stdout, err := consumer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Start(); err != nil {
		t.Fatal(err)
	}
	defer consumer.Process.Kill()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	want := runProducer(t, dir, 50)
	timeout := time.After(time.Minute)
	for i, w := range want {
		select {
		case got, ok := <-lines:
			if !ok {
				t.Fatalf("the consumer stopped after %d messages", i)
			}
			if got != w {
				t.Fatalf("message %d: the consumer printed %q, the producer appended %q", i, got, w)
			}
		case <-timeout:
			t.Fatalf("the consumer printed %d of %d messages in a minute", i, len(want))
		}
	}
	if err := consumer.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for extra := range lines {
		t.Errorf("the consumer printed %q, which no producer appended", extra)
	}
	if err := consumer.Wait(); err != nil {
		t.Fatalf("the consumer, interrupted: %v; want a clean exit", err)
	}

	// Two producers at once while no consumer runs; then a new consumer.
	res := make(chan []string, 2)
	for range 2 {
		go func() {
			out, err := command("produce", "-n", "30", "-every", "0s", dir).Output()
			if err != nil {
				t.Errorf("producer: %v", err)
			}
			res <- strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		}()
	}
	a, b := <-res, <-res
	out, err := command("consume", "-n", "60", dir).Output()
	if err != nil {
		t.Fatalf("the second consumer: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	var fromA, fromB []string
	for _, l := range got {
		switch {
		case slices.Contains(a, l):
			fromA = append(fromA, l)
		case slices.Contains(b, l):
			fromB = append(fromB, l)
		default:
			t.Errorf("the second consumer printed %q, which neither producer appended since", l)
		}
	}
	if !slices.Equal(fromA, a) || !slices.Equal(fromB, b) {
		t.Fatalf("the second consumer printed\n%s\nwant each producer's 30 messages in its order:\n%s\n%s",
			strings.Join(got, "\n"), strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}
