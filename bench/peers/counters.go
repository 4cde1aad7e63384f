package peers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/values"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
)

// The two-process workload: two OS processes add one to the same counters
// (1,000 of them), each n times in turn over the counters, at once; the
// final value of every counter is then checked exactly.

// counterStore is one process's view of the shared counters.
type counterStore interface {
	Add(i int) error
	Value(i int) (uint64, error)
	Close() error
}

// counterKinds open the counters of each peer that two processes can share:
// where is a file or directory path, or the Redis address.
var counterKinds = map[string]func(where string, counters int, create bool) (counterStore, error){
	"offmap-handle": func(w string, n int, c bool) (counterStore, error) { return openOffmapCounters(w, n, c, true) },
	"offmap-update": func(w string, n int, c bool) (counterStore, error) { return openOffmapCounters(w, n, c, false) },
	"lmdb-nosync":   func(w string, n int, c bool) (counterStore, error) { return openLMDBCounters(w, n, c, true) },
	"lmdb":          func(w string, n int, c bool) (counterStore, error) { return openLMDBCounters(w, n, c, false) },
	"redis":         openRedisCounters,
}

func counterKey(i int) []byte { return fmt.Appendf(nil, "ctr-%06d", i) }

// offmap: through value handles acquired once (an atomic add on the mapped
// value), or through Update (a locked read-modify-write).
type offmapCounters struct {
	m       *offmap.Map
	handles []values.Int64
}

func openOffmapCounters(path string, n int, create, handles bool) (counterStore, error) {
	opts := offmap.Options{}
	if create {
		opts = offmap.Options{Entries: 2 * n, AverageKeySize: 10, AverageValueSize: 8}
	}
	m, err := offmap.Open(path, opts)
	if err != nil {
		return nil, err
	}
	c := &offmapCounters{m: m}
	if create || handles {
		c.handles = make([]values.Int64, n)
		for i := range n {
			if c.handles[i], err = m.AcquireInt64(counterKey(i)); err != nil {
				m.Close()
				return nil, err
			}
		}
	}
	if !handles {
		c.handles = nil
	}
	return c, nil
}

func (c *offmapCounters) Add(i int) error {
	if c.handles != nil {
		c.handles[i].Add(1)
		return nil
	}
	return c.m.Update(counterKey(i), incrLE)
}

func (c *offmapCounters) Value(i int) (uint64, error) {
	v, err := c.m.Get(counterKey(i))
	if err != nil {
		return 0, err
	}
	return fromLE(v)
}

func (c *offmapCounters) Close() error { return c.m.Close() }

// LMDB: a write transaction per add; LMDB serializes writers of all
// processes with a mutex in its lock file.
type lmdbCounters struct{ s *lmdbStore }

func openLMDBCounters(dir string, n int, create, noSync bool) (counterStore, error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	s, err := openLMDB(dir, noSync)
	if err != nil {
		return nil, err
	}
	if create {
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = counterKey(i)
		}
		if err := s.Load(keys, func(int) uint64 { return 0 }); err != nil {
			s.Close()
			return nil, err
		}
	}
	return &lmdbCounters{s}, nil
}

func (c *lmdbCounters) Add(i int) error             { return c.s.Incr(counterKey(i)) }
func (c *lmdbCounters) Value(i int) (uint64, error) { return c.s.Get(counterKey(i)) }
func (c *lmdbCounters) Close() error                { return c.s.Close() }

// Redis: INCR, one round trip each, one connection per process.
type redisCounters struct {
	c   *redis.Client
	ctx context.Context
}

func openRedisCounters(addr string, n int, create bool) (counterStore, error) {
	s := &RedisServer{Addr: addr}
	c := &redisCounters{c: s.Client(1), ctx: context.Background()}
	if create {
		args := make([]any, 0, 2*n)
		for i := range n {
			args = append(args, string(counterKey(i)), "0")
		}
		if err := c.c.MSet(c.ctx, args...).Err(); err != nil {
			c.c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *redisCounters) Add(i int) error { return c.c.Incr(c.ctx, string(counterKey(i))).Err() }
func (c *redisCounters) Value(i int) (uint64, error) {
	return c.c.Get(c.ctx, string(counterKey(i))).Uint64()
}
func (c *redisCounters) Close() error { return c.c.Close() }

// ChildArg is the first argument of a child process of the two-process
// workload; a program running RunMaps calls ChildMain when it sees it.
const ChildArg = "__peers_child"

// ChildMain runs a child process and returns its exit code:
//
//	ChildArg counters KIND WHERE COUNTERS N   add n times, after "go" on stdin
//	ChildArg bolt-open PATH                   try to open a bbolt file another process has open
func ChildMain(args []string) int {
	if err := child(args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peers child:", err)
		return 1
	}
	return 0
}

func child(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("no child command")
	}
	switch args[0] {
	case "counters":
		if len(args) != 5 {
			return fmt.Errorf("counters wants KIND WHERE COUNTERS N, got %q", args[1:])
		}
		open, ok := counterKinds[args[1]]
		if !ok {
			return fmt.Errorf("unknown counter kind %q", args[1])
		}
		counters, err1 := strconv.Atoi(args[3])
		n, err2 := strconv.Atoi(args[4])
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		s, err := open(args[2], counters, false)
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Fprintln(out, "ready")
		if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
			return fmt.Errorf("waiting for go: %w", err)
		}
		if err := addLoop(s, counters, n); err != nil {
			return err
		}
		if err := s.Close(); err != nil {
			return err
		}
		fmt.Fprintln(out, "done")
		return nil
	case "bolt-open":
		if len(args) != 2 {
			return errors.New("bolt-open wants PATH")
		}
		start := time.Now()
		db, err := bolt.Open(args[1], 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			fmt.Fprintf(out, "error after %v: %v\n", time.Since(start).Round(10*time.Millisecond), err)
			return nil
		}
		db.Close()
		fmt.Fprintln(out, "opened")
		return nil
	}
	return fmt.Errorf("unknown child command %q", args[0])
}

func addLoop(s counterStore, counters, n int) error {
	for i := range n {
		if err := s.Add(i % counters); err != nil {
			return err
		}
	}
	return nil
}

// TwoProcesses is the outcome of the two-process workload for one peer.
type TwoProcesses struct {
	Total   int           // increments by both processes together
	Elapsed time.Duration // from the start signal until both finished
	Checked bool          // every counter equalled its share exactly
	Cannot  string        // why the peer cannot do it, if it cannot
	Err     error
}

// Rate is increments per second.
func (t TwoProcesses) Rate() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Total) / t.Elapsed.Seconds()
}

// runTwoProcesses creates the counters, starts a child process and runs
// the add loop here and there at once, total/2 adds each.
func runTwoProcesses(kind, where string, counters, total int, exe string) TwoProcesses {
	res := TwoProcesses{Total: total}
	open := counterKinds[kind]
	s, err := open(where, counters, true)
	if err == nil && strings.HasPrefix(kind, "lmdb") {
		// LMDB must not be opened twice in one process: reopen.
		if err = s.Close(); err == nil {
			s, err = open(where, counters, false)
		}
	}
	if err != nil {
		res.Err = err
		return res
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	n := total / 2
	cmd := exec.Command(exe, ChildArg, "counters", kind, where, strconv.Itoa(counters), strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		res.Err = err
		return res
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		res.Err = err
		return res
	}
	if err := cmd.Start(); err != nil {
		res.Err = err
		return res
	}
	lines := bufio.NewReader(stdout)
	if l, err := lines.ReadString('\n'); err != nil || l != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		res.Err = fmt.Errorf("child did not get ready: %q %v", l, err)
		return res
	}
	done := make(chan error, 1)
	start := time.Now()
	fmt.Fprintln(stdin, "go")
	go func() {
		l, err := lines.ReadString('\n')
		if err == nil && l != "done\n" {
			err = fmt.Errorf("child said %q", l)
		}
		if werr := cmd.Wait(); err == nil {
			err = werr
		}
		done <- err
	}()
	err = addLoop(s, counters, n)
	cerr := <-done
	res.Elapsed = time.Since(start)
	if err = errors.Join(err, cerr); err != nil {
		res.Err = err
		return res
	}
	want := uint64(2 * n / counters)
	for i := range counters {
		v, err := s.Value(i)
		if err != nil {
			res.Err = fmt.Errorf("counter %d: %w", i, err)
			return res
		}
		if v != want {
			res.Err = fmt.Errorf("counter %d = %d, want %d: increments were lost", i, v, want)
			return res
		}
	}
	res.Checked = true
	return res
}

// boltSecondProcess opens a bbolt file here and has a child process try to
// open it too, and returns what the child saw.
func boltSecondProcess(dir, exe string) (string, error) {
	path := filepath.Join(dir, "shared.bolt")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "", err
	}
	defer db.Close()
	out, err := exec.Command(exe, ChildArg, "bolt-open", path).Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
