// Command peers runs offmap's comparison with the systems its users would
// pick instead, and prints the tables as Markdown on standard output
// (progress goes to standard error):
//
//	cd bench/peers && go run ./cmd/peers -short    about 15 minutes on 2 cores
//	cd bench/peers && go run ./cmd/peers           the full comparison
//
// It installs redis-server from Debian's packages when it is missing (as
// root), starts it on a free loopback port and stops it at the end; NATS
// runs embedded with JetStream file storage, and the Kafka protocol
// through franz-go's in-process kfake cluster. Run with -h for the flags.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/offmap/offmap/bench/eda"
	"github.com/offmap/offmap/bench/peers"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case peers.ChildArg:
			os.Exit(peers.ChildMain(os.Args[1:]))
		case eda.ChildArg:
			os.Exit(eda.ChildMain(os.Args[1:]))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if err == flag.ErrHelp {
			return
		}
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
}

const (
	shortOffmapCounts = "1,10,50,100,150,200,300,500,750,1000,1500,2000"
	fullOffmapCounts  = "1,10,25,50,100,150,200,250,300,375,500,750,1000,1500,2000,3000"
	peerCounts        = "1,2,5,10,20,50,100,200,500,1000"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "the shorter comparison (under 20 minutes on 2 cores): smaller budgets, shorter runs, coarser counts")
	parts := fs.String("parts", "maps,eda", "what to run: maps, eda or both")
	mapPeers := fs.String("maps", "", "map peers to run, by id (offmap, offmap-handle, lmdb-nosync, lmdb, bbolt-nosync, bbolt, redis, fastcache, gomap); empty: all")
	transports := fs.String("transports", "", "EDA transports to run, by id (offmap, nats, kafka, redis); empty: all")
	entries := fs.Int("entries", 1_000_000, "map entries")
	budget := fs.Duration("budget", 0, "time bound of one timed map workload of one peer (default 20s, -short 2s)")
	twoBudget := fs.Duration("two-budget", 0, "time bound (estimated) of the two-process counters of one peer (default 2m, -short 30s)")
	increments := fs.Int("increments", 1_000_000, "increments by the two processes together")
	counters := fs.Int("counters", 1000, "counters the two processes share")
	warmup := fs.Duration("warmup", 3*time.Second, "EDA warm-up per setting")
	runs := fs.Int("runs", 0, "EDA measured runs per setting (default 3, -short 2)")
	runLength := fs.Duration("run", 0, "EDA run length (default 5s, -short 3s)")
	offCounts := fs.String("offmap-counts", "", "instance counts for offmap's sweeps (default "+fullOffmapCounts+"; -short "+shortOffmapCounts+")")
	pCounts := fs.String("peer-counts", peerCounts, "instance counts for the peers' sweeps")
	sla := fs.Duration("sla", 100*time.Millisecond, "p99.9 a setting must stay under")
	batch := fs.Duration("batch", time.Millisecond, "release due sends at most this often (eda.Config.Batch, as edabench)")
	dir := fs.String("dir", os.TempDir(), "directory for the stores, queues and brokers' files")
	out := fs.String("o", "", "also write the report to this file")
	verbose := fs.Bool("v", false, "print each EDA setting's runs (JLBH style) on standard error")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: go run ./cmd/peers [-short] [flags]   (in bench/peers)

Runs offmap's comparison with bbolt, LMDB, Redis, fastcache and a Go map
(map workloads), and with NATS JetStream, the Kafka protocol (kfake) and
Redis Streams (the EDA chain), and prints Markdown tables on standard
output; progress goes to standard error. Installs redis-server with apt-get
when it is missing (as root).

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	def := func(d *time.Duration, full, sh time.Duration) {
		if *d == 0 {
			*d = map[bool]time.Duration{false: full, true: sh}[*short]
		}
	}
	def(budget, 20*time.Second, 2*time.Second)
	def(twoBudget, 2*time.Minute, 30*time.Second)
	def(runLength, 5*time.Second, 3*time.Second)
	if *runs == 0 {
		*runs = map[bool]int{false: 3, true: 2}[*short]
	}
	if *offCounts == "" {
		*offCounts = map[bool]string{false: fullOffmapCounts, true: shortOffmapCounts}[*short]
	}
	oc, err := parseCounts(*offCounts)
	if err != nil {
		return err
	}
	pc, err := parseCounts(*pCounts)
	if err != nil {
		return err
	}
	doMaps, doEDA := strings.Contains(*parts, "maps"), strings.Contains(*parts, "eda")
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("-dir %s is not a directory", *dir)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}

	var report bytes.Buffer
	w := io.MultiWriter(stdout, &report)
	started := time.Now()
	load0 := loadAvg()

	needRedis := (doMaps && (*mapPeers == "" || strings.Contains(*mapPeers, "redis"))) ||
		(doEDA && (*transports == "" || strings.Contains(*transports, "redis")))
	var srv *peers.RedisServer
	var redisErr error
	if needRedis {
		srv, redisErr = peers.StartRedis(stderr)
		if redisErr != nil {
			fmt.Fprintln(stderr, "peers: Redis rows will be empty:", redisErr)
		} else {
			fmt.Fprintf(stderr, "redis-server %s started on %s (pid %d)\n", srv.Version, srv.Addr, srv.PID)
			defer func() {
				srv.Stop()
				fmt.Fprintln(stderr, "redis-server stopped")
			}()
		}
	}

	fmt.Fprintln(w, "# offmap and its peers: measured results")
	fmt.Fprintln(w)
	writeMachine(w, started, load0, srv, args)

	if doMaps {
		mcfg := peers.MapConfig{
			Entries: *entries, Budget: *budget, Counters: *counters, Increments: *increments, TwoBudget: *twoBudget,
			Only: split(*mapPeers), Dir: *dir, Redis: srv, RedisErr: redisErr, Exe: exe, Log: stderr,
		}
		var rtt [2]string
		if srv != nil {
			rtt[0] = roundTrip(srv)
		}
		rs := peers.RunMaps(ctx, mcfg)
		if srv != nil {
			rtt[1] = roundTrip(srv)
		}
		fmt.Fprintln(w, "## Map")
		fmt.Fprintln(w)
		peers.WriteMapTable(w, rs, mcfg)
		if srv != nil {
			fmt.Fprintf(w, "\nRedis loopback round trip (10,000 PINGs one at a time): before the map runs %s; after %s.\n", rtt[0], rtt[1])
		}
		fmt.Fprintln(w)
	}
	if doEDA && ctx.Err() == nil {
		ecfg := peers.EDAConfig{
			Warmup: *warmup, Runs: *runs, RunLength: *runLength, SLA: *sla, Rate: 1000, Batch: *batch,
			OffmapCounts: oc, PeerCounts: pc, Only: split(*transports), Dir: *dir,
			Redis: srv, RedisErr: redisErr, Log: stderr, Verbose: *verbose,
		}
		sweeps := peers.RunEDA(ctx, ecfg)
		fmt.Fprintln(w, "## Queue: the EDA chain")
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Each instance: a sender, five services and a receiver over six topics, %g messages a second; all instances in one process; %s; sends released at most every %v.\n\n",
			ecfg.Rate, peers.Budget(ecfg), ecfg.Batch)
		fmt.Fprintln(w, "### One instance")
		fmt.Fprintln(w)
		peers.WriteOneInstance(w, sweeps, ecfg)
		fmt.Fprintln(w)
		fmt.Fprintf(w, "### Instances until p99.9 passes %v\n\n", ecfg.SLA)
		peers.WriteHeadline(w, sweeps, ecfg)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Every setting:")
		fmt.Fprintln(w)
		peers.WriteSweeps(w, sweeps, ecfg)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Finished in %v; load average %s at the start, %s at the end.\n",
		time.Since(started).Round(time.Second), load0, loadAvg())
	if *out != "" {
		if err := os.WriteFile(*out, report.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func roundTrip(srv *peers.RedisServer) string {
	p50, p99, err := peers.RedisRoundTrip(srv, 10_000)
	if err != nil {
		return "error: " + err.Error()
	}
	s := fmt.Sprintf("p50 %.1f us, p99 %.1f us", float64(p50.Nanoseconds())/1e3, float64(p99.Nanoseconds())/1e3)
	if p50 > 40*time.Microsecond {
		s += " (slow: this VM's loopback round trip jumps at times)"
	}
	return s
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad instance count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
