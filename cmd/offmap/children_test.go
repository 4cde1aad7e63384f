package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/offmap/offmap/offmap"
)

// Child processes, run as this test binary with childEnv set:
//
//	writer   applies writerOps to the map, printing how many have
//	         completed as they do; when stdin closes it prints the final
//	         count and exits
//	holder   holds a segment lock (inside Update) until stdin closes
//	sleeper  prints "ready" and waits until stdin closes
//	opener   opens the map, prints "ready" and keeps it open until stdin
//	         closes
func runChild(kind, path string) {
	switch kind {
	case "opener":
		m, err := offmap.Open(path, offmap.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		m.Close()
	case "writer":
		childWriter(path)
	case "holder":
		childHolder(path)
	case "sleeper":
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
	default:
		fmt.Fprintf(os.Stderr, "unknown child %q\n", kind)
		os.Exit(3)
	}
}

// writerOp puts value under key, or deletes key when del is true.
type writerOp struct {
	key   string
	value string
	del   bool
}

// The writer's map and operations: a mix of inserts, deletes and updates
// of every kind (one atomic word, in place through the redo record, and
// relocation to larger chunks).
const (
	writerKeys     = 1500
	writerEntries  = 2000
	writerAvgKey   = 10
	writerAvgValue = 40
)

func writerOps(n int) []writerOp {
	r := rand.New(rand.NewPCG(1, 2))
	ops := make([]writerOp, n)
	for i := range ops {
		key := fmt.Sprintf("w-%04d", r.IntN(writerKeys))
		if r.IntN(5) == 0 {
			ops[i] = writerOp{key: key, del: true}
			continue
		}
		var size int
		switch r.IntN(5) {
		case 0, 1:
			size = r.IntN(9)
		case 2, 3:
			size = 9 + r.IntN(40)
		default:
			size = 49 + r.IntN(72)
		}
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(i*31 + j*7)
		}
		ops[i] = writerOp{key: key, value: string(v)}
	}
	return ops
}

func (op writerOp) apply(model map[string]string) {
	if op.del {
		delete(model, op.key)
	} else {
		model[op.key] = op.value
	}
}

func childWriter(path string) {
	n, _ := strconv.Atoi(os.Getenv("OFFMAP_CLI_TEST_OPS"))
	ops := writerOps(n)
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var done atomic.Int64
	stopped := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stopped)
	}()
	go func() {
		last := int64(-1)
		for {
			if d := done.Load(); d != last {
				fmt.Printf("%d\n", d)
				last = d
			} else {
				runtime.Gosched()
			}
		}
	}()
	for i, op := range ops {
		select {
		case <-stopped:
			fmt.Printf("%d\n", i)
			os.Exit(0)
		default:
		}
		if op.del {
			_, err = m.Delete([]byte(op.key))
		} else {
			err = m.Put([]byte(op.key), []byte(op.value))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		done.Store(int64(i + 1))
	}
	<-stopped // or killed
	fmt.Printf("%d\n", len(ops))
	os.Exit(0)
}

func childHolder(path string) {
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	err = m.Update([]byte("held"), func([]byte, bool) ([]byte, offmap.Op) {
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		return []byte("released"), offmap.OpPut
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	m.Close()
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startChild(t *testing.T, kind, path string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], path)
	// Under -race, the child is a race-enabled binary: skip its one-second
	// wait at exit.
	cmd.Env = append(append(os.Environ(), childEnv+"="+kind, "GORACE=atexit_sleep_ms=0"), env...)
	cmd.Stderr = os.Stderr
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
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	return c
}

// expect reads the child's next line and checks it.
func (c *child) expect(t *testing.T, want string) {
	t.Helper()
	if !c.out.Scan() || c.out.Text() != want {
		t.Fatalf("child said %q (%v), want %q", c.out.Text(), c.out.Err(), want)
	}
}

// release closes the child's stdin and waits for it to exit.
func (c *child) release(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// kill SIGKILLs the child and reaps it.
func (c *child) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// deadToken returns a lock-owner token of a process that has exited, and
// its pid: on Linux the offset of a witness byte that nobody holds, with
// the pid in its low 22 bits (docs/FORMAT.md, Tokens).
func deadToken(t *testing.T) (uint64, int) {
	t.Helper()
	c := startChild(t, "sleeper", "-")
	c.expect(t, "ready")
	pid := c.cmd.Process.Pid
	c.release(t)
	return 1<<62 | 0x5eed<<22 | uint64(pid), pid
}
