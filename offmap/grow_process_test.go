package offmap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The multi-process growth test: a map declared for 1,000 entries takes
// 50,000 from two writer processes, with values up to ten times the
// declared average, while other writers are SIGKILLed mid-growth, a
// process adds to a handle it acquired before the growth, and readers in
// other processes check values all along.

const (
	growDeclared = 1000
	growAvgValue = 16
	growPresent  = 500 // keys stored before any growth
)

func presentKey(i int) []byte { return fmt.Appendf(nil, "present-%04d", i) }

func victimKey(v, i int) []byte { return fmt.Appendf(nil, "victim-%02d-%07d", v, i) }

func init() {
	children["grow-writer"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		from, _ := strconv.Atoi(os.Getenv("FROM"))
		to, _ := strconv.Atoi(os.Getenv("TO"))
		for i := from; i < to; i++ {
			if err := m.Put(key(i), bigValue(i, growValueSize(i, growAvgValue))); err != nil {
				return fmt.Errorf("Put(%s): %w", key(i), err)
			}
		}
		return nil
	}
	// grow-victim inserts its own keys in order until it is killed. With
	// STOP set, it stops at that growth step, says so and waits there,
	// holding the segment lock, for the kill.
	children["grow-victim"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		v, _ := strconv.Atoi(os.Getenv("VICTIM"))
		if stop := os.Getenv("STOP"); stop != "" {
			crashPoint = func(step string) {
				if step == stop {
					fmt.Println("stopped")
					time.Sleep(time.Hour) // until killed
				}
			}
		}
		fmt.Println("started")
		for i := 0; ; i++ {
			if err := m.Put(victimKey(v, i), bigValue(i, growValueSize(i*7, growAvgValue))); err != nil {
				return err
			}
		}
	}
	// grow-adder acquires its handle, says so, adds to it from "go" until
	// its stdin closes, and prints how many it added.
	children["grow-adder"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer m.Close()
		h, err := m.AcquireInt64([]byte("hits"))
		if err != nil {
			return err
		}
		fmt.Println("acquired")
		in := bufio.NewReader(os.Stdin)
		if _, err := in.ReadString('\n'); err != nil {
			return err
		}
		stop := make(chan struct{})
		go func() { io.Copy(io.Discard, in); close(stop) }()
		n := 0
		for {
			select {
			case <-stop:
				fmt.Println(n)
				return nil
			default:
			}
			for range 1000 {
				h.Add(1)
			}
			n += 1000
		}
	}
	// grow-reader checks the present keys, and any writer key it finds,
	// until its stdin closes; it prints how many reads it made.
	children["grow-reader"] = func() error {
		m, err := Open(os.Getenv("MAP"), Options{ReadOnly: os.Getenv("RO") == "1"})
		if err != nil {
			return err
		}
		defer m.Close()
		stop := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 3))
		var buf []byte
		reads, found := 0, 0
		for {
			select {
			case <-stop:
				fmt.Println(reads, found)
				return nil
			default:
			}
			for range 100 {
				i := rng.IntN(growPresent)
				buf, err = m.AppendValue(buf[:0], presentKey(i))
				if err != nil || !bytes.Equal(buf, bigValue(i, growAvgValue)) {
					h := m.hash(presentKey(i))
					sg := m.segment(h.seg)
					again, err2 := m.Get(presentKey(i))
					off, n := tableAt(sg.hdr.table.Load())
					return fmt.Errorf("present key %s: %q, %v; again %q %v; seg %d version %d table %d/%d view %d count %d owner %v",
						presentKey(i), buf, err, again, err2, h.seg, sg.hdr.version.Load(), off, n, len(m.current()), sg.hdr.count.Load(), sg.hdr.lock.Owner())
				}
				j := rng.IntN(50_000)
				buf, err = m.AppendValue(buf[:0], key(j))
				switch {
				case errors.Is(err, ErrNotFound):
				case err != nil || !bytes.Equal(buf, bigValue(j, growValueSize(j, growAvgValue))):
					return fmt.Errorf("key %s: %q, %v", key(j), buf, err)
				default:
					found++
				}
				reads += 2
			}
		}
	}
}

func TestGrowAcrossProcesses(t *testing.T) {
	const writers, perWriter = 2, 25_000
	p := tempPath(t)
	m, err := Open(p, Options{Entries: growDeclared, AverageKeySize: 12, AverageValueSize: growAvgValue,
		MaxValueSize: 512, LockTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range growPresent {
		mustPut(t, m, presentKey(i), bigValue(i, growAvgValue))
	}
	start := m.Stats()
	m.Close()

	adder := child(t, "grow-adder", "MAP="+p)
	adderIn, _ := adder.StdinPipe()
	adderPipe, _ := adder.StdoutPipe()
	adderOut := bufio.NewReader(adderPipe)
	adder.Stderr = os.Stderr
	if err := adder.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := adderOut.ReadString('\n'); err != nil || line != "acquired\n" {
		t.Fatalf("adder: %q, %v", line, err)
	}

	type reader struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   bytes.Buffer
	}
	var readers []*reader
	for _, ro := range []string{"0", "1"} {
		r := &reader{cmd: child(t, "grow-reader", "MAP="+p, "RO="+ro)}
		r.stdin, _ = r.cmd.StdinPipe()
		r.cmd.Stdout, r.cmd.Stderr = &r.out, os.Stderr
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}

	writerDone := make(chan error, writers)
	for w := range writers {
		cmd := child(t, "grow-writer", "MAP="+p, "FROM="+strconv.Itoa(w*perWriter), "TO="+strconv.Itoa((w+1)*perWriter))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { writerDone <- cmd.Wait() }()
	}
	adderIn.Write([]byte("go\n"))

	// Victims: start one, kill it at a random instant, or (every other
	// one) at a step of growth if it gets there within 200 ms; again until
	// the writers are done (at least 12 times).
	steps := []string{"grow.claimed", "grow.table.copying", "grow.table.filled", "grow.table.published",
		"grow.extent.cleared", "grow.extent.published", "grow.reuse.taken", "grow.free.merging"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	victims, finished, midGrowth := 0, 0, 0
	for finished < writers || victims < 12 {
		stop, wait := "", time.Duration(rng.IntN(20_000))*time.Microsecond
		if victims%2 == 1 {
			stop, wait = steps[victims/2%len(steps)], 200*time.Millisecond
		}
		cmd := child(t, "grow-victim", "MAP="+p, "VICTIM="+strconv.Itoa(victims), "STOP="+stop)
		pipe, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(pipe)
		if line, err := out.ReadString('\n'); err != nil || line != "started\n" {
			t.Fatalf("victim %d: %q, %v", victims, line, err)
		}
		stopped := make(chan bool, 1)
		go func() {
			line, _ := out.ReadString('\n')
			stopped <- line == "stopped\n"
		}()
		select {
		case ok := <-stopped:
			if ok {
				midGrowth++
			}
		case <-time.After(wait):
		}
		cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); err == nil {
			t.Fatalf("victim %d exited on its own", victims)
		}
		victims++
		for drained := false; !drained; {
			select {
			case err := <-writerDone:
				if err != nil {
					t.Fatalf("writer: %v", err)
				}
				finished++
			default:
				drained = true
			}
		}
	}
	adderIn.Close()
	line, _ := adderOut.ReadString('\n')
	adds, err := strconv.Atoi(string(bytes.TrimSpace([]byte(line))))
	if err := adder.Wait(); err != nil {
		t.Fatalf("adder: %v", err)
	}
	if err != nil || adds == 0 {
		t.Fatalf("adder printed %q", line)
	}
	for _, r := range readers {
		r.stdin.Close()
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("reader: %v", err)
		}
	}

	// A new process's view: this one opens the file afresh.
	m, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeChecked(t, m)
	for i := range growPresent {
		mustGet(t, m, presentKey(i), string(bigValue(i, growAvgValue)))
	}
	for i := range writers * perWriter {
		mustGet(t, m, key(i), string(bigValue(i, growValueSize(i, growAvgValue))))
	}
	if v, err := m.Get([]byte("hits")); err != nil || balance(v) != int64(adds) {
		t.Fatalf("hits = %d (%v), want %d", balance(v), err, adds)
	}
	victimKeys := 0
	for v := range victims {
		// Each victim's keys are a prefix of its sequence: all completed
		// puts, and nothing after the one it died in.
		n := 0
		for ; ; n++ {
			got, err := m.Get(victimKey(v, n))
			if errors.Is(err, ErrNotFound) {
				break
			}
			if err != nil || !bytes.Equal(got, bigValue(n, growValueSize(n*7, growAvgValue))) {
				t.Fatalf("victim %d key %d: %q, %v", v, n, got, err)
			}
		}
		for j := n + 1; j < n+5; j++ {
			mustMiss(t, m, victimKey(v, j))
		}
		victimKeys += n
	}
	if want := growPresent + writers*perWriter + 1 + victimKeys; m.Len() != want {
		t.Fatalf("Len = %d, want %d", m.Len(), want)
	}
	st := m.Stats()
	t.Logf("%d adds through a handle; %d victims killed, %d of them in a growth step (%d keys of theirs stored); grew %d tables and %d extents; file %d -> %d bytes; readers: %s, %s",
		adds, victims, midGrowth, victimKeys, st.TablesGrown, st.ExtentsAdded, start.FileSize, st.FileSize,
		bytes.TrimSpace(readers[0].out.Bytes()), bytes.TrimSpace(readers[1].out.Bytes()))
	if st.TablesGrown == 0 || st.ExtentsAdded == 0 || midGrowth == 0 {
		t.Fatalf("the map did not grow, or no victim was killed growing it (%d): %+v", midGrowth, st)
	}
	if st.Reused == 0 {
		t.Fatalf("no growth step reused a freed table: %+v", st)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}
