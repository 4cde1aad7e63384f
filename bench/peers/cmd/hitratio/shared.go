package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/offmap/offmap/bench/peers"
	"github.com/offmap/offmap/bench/peers/hitratio"
)

// The shared cache: one cache, two processes. For each trace, its
// requests are dealt alternately to two players at once, on one offmap
// map (two processes) and on one Redis with allkeys-lru (two clients);
// one process alone on offmap is the reference. Each reports its hit
// ratio over the last two thirds of the requests and the rate of all.

var (
	childPart = flag.Int("child", -1, "internal: play part `N` (0 or 1) of a trace on the map at -map")
	childMap  = flag.String("map", "", "internal: the map file of -child")
	childKind = flag.String("trace", "", "internal: the trace of -child: zipf or scan")
)

func traceOf(kind string, keys, requests, capacity int) hitratio.Trace {
	if kind == "scan" {
		return hitratio.ScanTrace(keys, requests, 0.9, 5*capacity, capacity, 4)
	}
	return hitratio.ZipfTrace(keys, requests, 0.9, 2)
}

type played struct {
	hits, counted int
	elapsed       time.Duration
}

// play runs the requests of t dealt to part (every second one from part)
// through access.
func play(t hitratio.Trace, part, parts int, access func(uint64) bool) played {
	var p played
	warm := len(t.Keys) / 3
	start := time.Now()
	for i := part; i < len(t.Keys); i += parts {
		hit := access(t.Keys[i])
		if i >= warm {
			p.counted++
			if hit {
				p.hits++
			}
		}
	}
	p.elapsed = time.Since(start)
	return p
}

// runChild is a player process: it opens the map, says "ready", plays its
// part on "go" and prints its result.
func runChild(keys, requests int) error {
	capacity := keys / 100
	t := traceOf(*childKind, keys, requests, capacity)
	c, err := hitratio.OpenOffmap(*childMap, capacity)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	p := play(t, *childPart, 2, c.Access)
	fmt.Println(p.hits, p.counted, int64(p.elapsed))
	return nil
}

func sum(ps ...played) (ratio, rate float64) {
	var hits, counted, n int
	var longest time.Duration
	for _, p := range ps {
		hits += p.hits
		counted += p.counted
		longest = max(longest, p.elapsed)
	}
	n = counted * 3 / 2 // all requests, warm ones included
	return float64(hits) / float64(counted), float64(n) / longest.Seconds()
}

func shared(keys, requests int) error {
	capacity := keys / 100
	srv, err := peers.StartRedis(os.Stderr)
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Printf("shared cache: capacity %d entries (1 %% of %d keys), %d requests per trace dealt alternately to two players at once; redis-server %s on loopback\n\n",
		capacity, keys, requests, srv.Version)
	fmt.Println("| trace | offmap, 1 process | offmap, 2 processes | Redis allkeys-lru, 2 clients |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for _, kind := range []string{"zipf", "scan"} {
		t := traceOf(kind, keys, requests, capacity)
		one := hitratio.NewOffmap(capacity)
		r1, q1 := sum(play(t, 0, 1, one.Access))
		one.Close()
		r2, q2, err := twoProcesses(kind, keys, requests, capacity)
		if err != nil {
			return err
		}
		r3, q3, err := redisPlayers(srv, t, capacity)
		if err != nil {
			return err
		}
		cell := func(r, q float64) string { return fmt.Sprintf("%.2f %% hits, %.0f k req/s", 100*r, q/1e3) }
		fmt.Printf("| %s | %s | %s | %s |\n", t.Name, cell(r1, q1), cell(r2, q2), cell(r3, q3))
	}
	fmt.Println()
	return nil
}

func twoProcesses(kind string, keys, requests, capacity int) (ratio, rate float64, err error) {
	dir, err := os.MkdirTemp("", "hitratio-shared-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "cache.map")
	c, err := hitratio.OpenOffmap(path, capacity)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	type proc struct {
		in  io.WriteCloser
		out *bufio.Reader
	}
	var procs []proc
	for part := range 2 {
		cmd := exec.Command(exe, "-child", strconv.Itoa(part), "-map", path, "-trace", kind,
			"-keys", strconv.Itoa(keys), "-requests", strconv.Itoa(requests))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, 0, err
		}
		defer cmd.Wait()
		defer in.Close()
		p := proc{in: in, out: bufio.NewReader(out)}
		if line, err := p.out.ReadString('\n'); err != nil || line != "ready\n" {
			return 0, 0, fmt.Errorf("player %d: %q, %v", part, line, err)
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		io.WriteString(p.in, "go\n")
	}
	var ps []played
	for i, p := range procs {
		line, err := p.out.ReadString('\n')
		f := strings.Fields(line)
		if err != nil || len(f) != 3 {
			return 0, 0, fmt.Errorf("player %d said %q: %v", i, line, err)
		}
		var pl played
		pl.hits, _ = strconv.Atoi(f[0])
		pl.counted, _ = strconv.Atoi(f[1])
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		pl.elapsed = time.Duration(ns)
		ps = append(ps, pl)
	}
	ratio, rate = sum(ps...)
	return ratio, rate, nil
}

// redisPlayers plays t on Redis bounded to about capacity entries of 8-byte
// keys and values (maxmemory from the memory that many take), with
// allkeys-lru, from two clients at once: GET, and SET on a miss.
func redisPlayers(srv *peers.RedisServer, t hitratio.Trace, capacity int) (ratio, rate float64, err error) {
	ctx := context.Background()
	c := srv.Client(2)
	defer c.Close()
	used := func() (int64, error) {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, errors.New("no used_memory in INFO")
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		return 0, 0, err
	}
	c.FlushAll(ctx)
	before, err := used()
	if err != nil {
		return 0, 0, err
	}
	pipe := c.Pipeline()
	var k [8]byte
	for i := range capacity {
		binary.LittleEndian.PutUint64(k[:], uint64(1<<40+i))
		pipe.Set(ctx, string(k[:]), "vvvvvvvv", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, err
	}
	after, err := used()
	if err != nil {
		return 0, 0, err
	}
	c.FlushAll(ctx)
	base, err := used()
	if err != nil {
		return 0, 0, err
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		return 0, 0, err
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(base+after-before, 10)).Err(); err != nil {
		return 0, 0, err
	}
	defer c.ConfigSet(ctx, "maxmemory", "0")
	ps := make([]played, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for part := range 2 {
		wg.Go(func() {
			cl := srv.Client(1)
			defer cl.Close()
			var key [8]byte
			ps[part] = play(t, part, 2, func(k uint64) bool {
				binary.LittleEndian.PutUint64(key[:], k)
				err := cl.Get(ctx, string(key[:])).Err()
				if err == nil {
					return true
				}
				if !errors.Is(err, redis.Nil) {
					errs[part] = err
				} else if err := cl.Set(ctx, string(key[:]), "vvvvvvvv", 0).Err(); err != nil && !strings.HasPrefix(err.Error(), "OOM") {
					// (An OOM reply, when Redis finds nothing more to evict
					// within maxmemory, leaves the key out, as a cache may.)
					errs[part] = err
				}
				return false
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	ratio, rate = sum(ps...)
	return ratio, rate, nil
}
