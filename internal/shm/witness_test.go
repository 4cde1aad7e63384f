package shm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/offmap/offmap/internal/reexec"
)

func TestMain(m *testing.M) {
	if path := os.Getenv("SHM_TEST_WITNESS"); path != "" {
		// A process that holds a witness in path until its stdin closes.
		f, _, err := OpenFile(path, false)
		if err == nil {
			var w *Witness
			if w, err = NewWitness(f, true); err == nil {
				fmt.Println(uint64(w.Token()))
				bufio.NewReader(os.Stdin).ReadString('\n')
				os.Exit(0)
			}
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func sharedFile(t testing.TB) (string, *os.File) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shared")
	if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _, err := OpenFile(p, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return p, f
}

// TestWitnessOfAnotherProcess: a process that holds the file open is alive
// to every other open, also one for reading only, and dead once it is
// killed; its token names its pid; a token of no process, zero, or a
// shape no process makes is dead.
func TestWitnessOfAnotherProcess(t *testing.T) {
	p, f := sharedFile(t)
	cmd := reexec.Command("-test.run=^$")
	cmd.Env = append(os.Environ(), "SHM_TEST_WITNESS="+p)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	n, err := strconv.ParseUint(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Fatalf("child said %q", line)
	}
	child := Token(n)
	if child.PID() != cmd.Process.Pid && !reexec.Emulated() {
		t.Fatalf("token %#x names pid %d, child is %d", n, child.PID(), cmd.Process.Pid)
	}
	writer, err := NewWitness(f, true)
	if err != nil {
		t.Fatal(err)
	}
	ro, _, err := OpenFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	reader, err := NewWitness(ro, false)
	if err != nil {
		t.Fatal(err)
	}
	if reader.Token() != 0 || writer.Token() == 0 || writer.Token() == child {
		t.Fatalf("tokens: reader %#x, writer %#x, child %#x", reader.Token(), writer.Token(), child)
	}
	for _, w := range []*Witness{writer, reader} {
		if !w.Alive(child) || !w.Alive(writer.Token()) {
			t.Fatal("a live process counts as dead")
		}
		if w.Alive(0) || w.Alive(Token(1<<31-1)) || w.Alive(child^1<<40) {
			t.Fatal("a token no process holds counts as alive")
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	stdin.Close()
	if writer.Alive(child) || reader.Alive(child) {
		t.Fatal("a killed process counts as alive")
	}
}
