package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisServer is a redis-server this package started: on 127.0.0.1, on a
// free port, with its data in a temporary directory, persisting through
// the append-only file written every command and fsynced once a second
// (appendfsync everysec, Redis's recommended durable setting); no RDB
// snapshots and no automatic AOF rewrite, so that no fork disturbs a
// measurement.
type RedisServer struct {
	Addr    string
	Dir     string // data directory (the AOF lives under it)
	Version string // as redis-server --version says
	PID     int

	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// ErrNoRedis says redis-server is not installed and could not be.
var ErrNoRedis = errors.New("peers: redis-server is not available")

// EnsureRedis returns the path of redis-server, installing Debian's
// package with apt-get when it is missing and this process runs as root.
func EnsureRedis(log io.Writer) (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: not installed, and installing it needs root (apt-get install -y redis-server)", ErrNoRedis)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("%w: not installed, and there is no apt-get", ErrNoRedis)
	}
	install := func() error {
		fmt.Fprintln(log, "installing redis-server: apt-get install -y redis-server")
		cmd := exec.Command("apt-get", "install", "-y", "-q", "redis-server")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install redis-server: %v: %s", err, lastLines(out, 5))
		}
		return nil
	}
	if err := install(); err != nil {
		fmt.Fprintln(log, "apt-get install failed; running apt-get update and trying again")
		if out, uerr := exec.Command("apt-get", "update", "-q").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("%w: apt-get update: %v: %s", ErrNoRedis, uerr, lastLines(out, 5))
		}
		if err := install(); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoRedis, err)
		}
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w: installed, but redis-server is not on PATH", ErrNoRedis)
	}
	return p, nil
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// StartRedis installs redis-server if needed and starts one on a free
// loopback port. Stop it with Stop.
func StartRedis(log io.Writer) (*RedisServer, error) {
	bin, err := EnsureRedis(log)
	if err != nil {
		return nil, err
	}
	s := &RedisServer{out: &syncBuffer{}, done: make(chan error, 1)}
	if v, err := exec.Command(bin, "--version").Output(); err == nil {
		if m := regexp.MustCompile(`v=(\S+)`).FindSubmatch(v); m != nil {
			s.Version = string(m[1])
		}
	}
	s.Dir, err = os.MkdirTemp("", "peers-redis-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.cmd = exec.Command(bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", s.Dir,
		"--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning", "--logfile", "",
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
		"--auto-aof-rewrite-percentage", "0", "--maxclients", "10000")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	// The server dies with this process if it is killed.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("%w: starting redis-server: %v", ErrNoRedis, err)
	}
	s.PID = s.cmd.Process.Pid
	go func() { s.done <- s.cmd.Wait() }()

	c := s.Client(1)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case werr := <-s.done:
			os.RemoveAll(s.Dir)
			return nil, fmt.Errorf("%w: redis-server exited: %v: %s", ErrNoRedis, werr, lastLines(s.out.Bytes(), 5))
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("%w: redis-server on %s did not answer: %v", ErrNoRedis, s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a client of the server with a pool of n connections,
// speaking RESP2 with no client-side extras (no CLIENT SETINFO, no
// maintenance notifications), as a plain Redis client does.
func (s *RedisServer) Client(n int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: s.Addr, PoolSize: n, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and removes its
// data directory.
func (s *RedisServer) Stop() error {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	return os.RemoveAll(s.Dir)
}

// DiskUsage returns the apparent size and the allocated size of the
// server's data directory.
func (s *RedisServer) DiskUsage() (apparent, allocated int64) {
	return dirUsage(s.Dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// dirUsage sums the sizes of the files under dir: as ls shows them and as
// du does (blocks allocated; sparse files take less).
func dirUsage(dir string) (apparent, allocated int64) {
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		apparent += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	return apparent, allocated
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 1<<20 {
		return len(p), nil
	}
	return b.b.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.b.Bytes()...)
}
