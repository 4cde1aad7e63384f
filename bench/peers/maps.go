package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"
)

// Map workloads, in the order they run on each peer.
const (
	Insert = iota // from empty, the keys in visiting order
	Get           // random existing keys
	Update        // Put of an existing key
	Incr          // read-modify-write of an existing key
	workloads
)

// WorkloadNames name the workloads in tables.
var WorkloadNames = [workloads]string{"insert", "get", "update", "incr"}

// MapPeer is a map the comparison measures.
type MapPeer struct {
	ID   string
	Name string
	// Open makes the store in dir, a fresh directory.
	Open func(dir string, entries int, srv *RedisServer) (Store, error)
	// Runs lists the workloads measured (others are not: the row repeats
	// another's); a peer that skips Insert is loaded untimed.
	Runs [workloads]bool
	// Disk: the store persists in files, measured after the insert; the
	// Redis server's directory for Redis.
	Disk bool
	// Memory: the store lives in this process's memory only.
	Memory     bool
	NeedsRedis bool
	// Counters is the two-process kind (counterKinds); when empty, Cannot
	// says why two processes cannot share the peer.
	Counters string
	Cannot   string
}

var all = [workloads]bool{true, true, true, true}

// MapPeers lists the map peers, offmap first.
func MapPeers() []MapPeer {
	return []MapPeer{
		{ID: "offmap", Name: "offmap (Put, Update)", Runs: all, Disk: true, Counters: "offmap-update",
			Open: func(dir string, n int, _ *RedisServer) (Store, error) { return openOffmap(dir, n, false) }},
		{ID: "offmap-handle", Name: "offmap (value handle Add)", Runs: [workloads]bool{Incr: true}, Counters: "offmap-handle",
			Open: func(dir string, n int, _ *RedisServer) (Store, error) { return openOffmap(dir, n, true) }},
		{ID: "lmdb-nosync", Name: "LMDB, no sync (NOSYNC, WRITEMAP)", Runs: all, Disk: true, Counters: "lmdb-nosync",
			Open: func(dir string, _ int, _ *RedisServer) (Store, error) { return openLMDB(dir, true) }},
		{ID: "lmdb", Name: "LMDB, default (fsync per commit)", Runs: all, Disk: true, Counters: "lmdb",
			Open: func(dir string, _ int, _ *RedisServer) (Store, error) { return openLMDB(dir, false) }},
		{ID: "bbolt-nosync", Name: "bbolt, NoSync", Runs: all, Disk: true, Cannot: "bolt",
			Open: func(dir string, _ int, _ *RedisServer) (Store, error) { return openBolt(dir, true) }},
		{ID: "bbolt", Name: "bbolt, default (fsync per commit)", Runs: all, Disk: true, Cannot: "bolt",
			Open: func(dir string, _ int, _ *RedisServer) (Store, error) { return openBolt(dir, false) }},
		{ID: "redis", Name: "Redis, loopback (AOF, fsync 1/s)", Runs: all, Disk: true, NeedsRedis: true, Counters: "redis",
			Open: func(_ string, _ int, srv *RedisServer) (Store, error) { return openRedis(srv) }},
		{ID: "fastcache", Name: "fastcache (in-process)", Runs: all, Memory: true, Cannot: "in-process only, not shared",
			Open: func(_ string, n int, _ *RedisServer) (Store, error) { return openFastcache(n), nil }},
		{ID: "gomap", Name: "Go map + sync.RWMutex (in-process)", Runs: all, Memory: true, Cannot: "in-process only, not shared",
			Open: func(_ string, n int, _ *RedisServer) (Store, error) { return openGoMap(n), nil }},
	}
}

// MapConfig is the map comparison.
type MapConfig struct {
	Entries int // 1,000,000
	// Budget bounds each timed workload of a peer: it stops after all
	// Entries operations or when the budget is spent, whichever is first.
	Budget time.Duration
	// Counters and Increments shape the two-process workload: Increments
	// adds in total over Counters counters. TwoBudget scales Increments
	// down for a peer whose single-process increment rate says it would
	// take longer than that (the table marks it).
	Counters, Increments int
	TwoBudget            time.Duration
	Only                 []string // peer IDs; empty means all
	Dir                  string
	Redis                *RedisServer
	RedisErr             error
	Exe                  string // for the child process (os.Executable if empty)
	Log                  io.Writer
}

// Cell is one measured workload.
type Cell struct {
	Ops     int
	Elapsed time.Duration
}

// NsPerOp is the mean time of an operation.
func (c Cell) NsPerOp() float64 {
	if c.Ops == 0 {
		return 0
	}
	return float64(c.Elapsed.Nanoseconds()) / float64(c.Ops)
}

// MapResult is one peer's row.
type MapResult struct {
	Peer      MapPeer
	Cells     [workloads]Cell
	Apparent  int64 // bytes of its files, as ls shows them
	Allocated int64 // bytes allocated, as du shows them
	Verified  int   // entries read back and found right after the run
	Two       TwoProcesses
	Err       error
}

// RunMaps runs every map peer.
func RunMaps(ctx context.Context, cfg MapConfig) []MapResult {
	if cfg.Exe == "" {
		cfg.Exe, _ = os.Executable()
	}
	keys, idx := makeKeys(cfg.Entries)
	var out []MapResult
	boltNote := ""
	for _, p := range MapPeers() {
		if len(cfg.Only) > 0 && !contains(cfg.Only, p.ID) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		r := MapResult{Peer: p}
		if p.NeedsRedis && cfg.Redis == nil {
			r.Err = fmt.Errorf("no redis-server: %v", cfg.RedisErr)
			out = append(out, r)
			continue
		}
		fmt.Fprintf(cfg.Log, "map: %s ...\n", p.Name)
		runtime.GC()
		debug.FreeOSMemory()
		r.Err = runMapPeer(ctx, cfg, p, keys, idx, &r)
		if p.Cannot == "bolt" {
			if boltNote == "" {
				boltNote = bboltCannot(cfg)
			}
			r.Two.Cannot = boltNote
		} else if p.Counters == "" {
			r.Two.Cannot = p.Cannot
		} else if r.Err == nil {
			r.Two = twoProcesses(cfg, p, r.Cells[Incr])
		}
		if r.Err != nil {
			fmt.Fprintf(cfg.Log, "  error: %v\n", r.Err)
		}
		out = append(out, r)
	}
	return out
}

// makeKeys returns the 16-byte keys key-%012d side by side in one buffer,
// in a random visiting order, and each one's number.
func makeKeys(n int) (keys [][]byte, idx []uint64) {
	order := rand.New(rand.NewPCG(1, 1)).Perm(n)
	flat := make([]byte, 0, 16*n)
	keys = make([][]byte, n)
	idx = make([]uint64, n)
	for j, i := range order {
		flat = fmt.Appendf(flat, "key-%012d", i)
		keys[j] = flat[16*j : 16*j+16 : 16*j+16]
		idx[j] = uint64(i)
	}
	return keys, idx
}

// timed runs op for j = 0, 1, ... until n operations or the budget.
func timed(n int, budget time.Duration, op func(j int) error) (Cell, error) {
	start := time.Now()
	deadline := start.Add(budget)
	j := 0
	for j < n {
		if err := op(j); err != nil {
			return Cell{Ops: j, Elapsed: time.Since(start)}, err
		}
		j++
		if j&63 == 0 && time.Now().After(deadline) {
			break
		}
	}
	return Cell{Ops: j, Elapsed: time.Since(start)}, nil
}

func runMapPeer(ctx context.Context, cfg MapConfig, p MapPeer, keys [][]byte, idx []uint64, r *MapResult) error {
	dir, err := os.MkdirTemp(cfg.Dir, "peers-map-")
	if err != nil {
		return err
	}
	defer removeAll(dir)
	s, err := p.Open(dir, cfg.Entries, cfg.Redis)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	n := len(keys)
	report := func(w int) {
		c := r.Cells[w]
		fmt.Fprintf(cfg.Log, "  %-6s %9d ops %s/op\n", WorkloadNames[w], c.Ops, fmtNs(c.NsPerOp()))
	}

	// Insert from empty; what the budget left is loaded untimed.
	inserted := 0
	if p.Runs[Insert] {
		if r.Cells[Insert], err = timed(n, cfg.Budget, func(j int) error { return s.Put(keys[j], idx[j]) }); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		inserted = r.Cells[Insert].Ops
		report(Insert)
	}
	if inserted < n {
		rest := keys[inserted:]
		val := func(j int) uint64 { return idx[inserted+j] }
		if l, ok := s.(loader); ok {
			err = l.Load(rest, val)
		} else {
			for j := range rest {
				if err = s.Put(rest[j], val(j)); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	if p.Disk {
		if p.NeedsRedis {
			time.Sleep(1100 * time.Millisecond) // the AOF is written and fsynced once a second
			r.Apparent, r.Allocated = cfg.Redis.DiskUsage()
		} else {
			r.Apparent, r.Allocated = dirUsage(dir)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	if p.Runs[Get] {
		if r.Cells[Get], err = timed(n, cfg.Budget, func(j int) error {
			v, err := s.Get(keys[j])
			if err == nil && v != idx[j] {
				err = fmt.Errorf("%s = %d, want %d", keys[j], v, idx[j])
			}
			return err
		}); err != nil {
			return fmt.Errorf("get: %w", err)
		}
		report(Get)
	}
	updated := 0
	if p.Runs[Update] {
		n := uint64(n)
		if r.Cells[Update], err = timed(len(keys), cfg.Budget, func(j int) error { return s.Put(keys[j], idx[j]+n) }); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		updated = r.Cells[Update].Ops
		report(Update)
	}
	incremented := 0
	if p.Runs[Incr] {
		if r.Cells[Incr], err = timed(n, cfg.Budget, func(j int) error { return s.Incr(keys[j]) }); err != nil {
			return fmt.Errorf("incr: %w", err)
		}
		incremented = r.Cells[Incr].Ops
		report(Incr)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Read every entry back.
	want := func(j int) uint64 {
		v := idx[j]
		if j < updated {
			v += uint64(n)
		}
		if j < incremented {
			v++
		}
		return v
	}
	if err := verify(s, keys, want); err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	r.Verified = n
	closed = true
	return s.Close()
}

// verify reads every key back and compares it with want.
func verify(s Store, keys [][]byte, want func(j int) uint64) error {
	if g, ok := s.(batchGetter); ok {
		got := make([]uint64, len(keys))
		if err := g.GetMany(keys, got); err != nil {
			return err
		}
		for j, v := range got {
			if v != want(j) {
				return fmt.Errorf("%s = %d, want %d", keys[j], v, want(j))
			}
		}
		return nil
	}
	for j, k := range keys {
		v, err := s.Get(k)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if v != want(j) {
			return fmt.Errorf("%s = %d, want %d", k, v, want(j))
		}
	}
	return nil
}

// twoProcesses runs the two-process counters for a peer, with fewer
// increments when its single-process rate says the full count would
// take longer than the budget.
func twoProcesses(cfg MapConfig, p MapPeer, incr Cell) TwoProcesses {
	total := cfg.Increments
	step := 2 * cfg.Counters
	if ns := incr.NsPerOp(); ns > 0 && cfg.TwoBudget > 0 {
		fit := int(float64(cfg.TwoBudget.Nanoseconds()) / ns)
		if fit < total {
			total = max(fit/step*step, 10*step)
		}
	}
	total = max(total/step*step, step)
	dir, err := os.MkdirTemp(cfg.Dir, "peers-two-")
	if err != nil {
		return TwoProcesses{Err: err}
	}
	defer removeAll(dir)
	where := filepath.Join(dir, "counters")
	if p.NeedsRedis {
		where = cfg.Redis.Addr
		defer func() {
			c := cfg.Redis.Client(1)
			c.FlushAll(context.Background())
			c.Close()
		}()
	}
	fmt.Fprintf(cfg.Log, "  two processes, %d counters, %d increments ...", cfg.Counters, total)
	t := runTwoProcesses(p.Counters, where, cfg.Counters, total, cfg.Exe)
	if t.Err != nil {
		fmt.Fprintf(cfg.Log, " error: %v\n", t.Err)
	} else {
		fmt.Fprintf(cfg.Log, " %.3f M/s, every counter exact\n", t.Rate()/1e6)
	}
	return t
}

// bboltCannot shows what a second process gets when it opens a bbolt
// file another has open.
func bboltCannot(cfg MapConfig) string {
	dir, err := os.MkdirTemp(cfg.Dir, "peers-bolt-")
	if err != nil {
		return "cannot: " + err.Error()
	}
	defer removeAll(dir)
	out, err := boltSecondProcess(dir, cfg.Exe)
	if err != nil {
		return "cannot (probe failed: " + err.Error() + ")"
	}
	if out == "opened" {
		return "a second process opened the file (unexpected)"
	}
	return "no: one writer process; a second Open waits for the file lock (" + out + ")"
}

// RedisRoundTrip measures n PINGs one at a time and returns the median
// and 99th percentile.
func RedisRoundTrip(srv *RedisServer, n int) (p50, p99 time.Duration, err error) {
	c := srv.Client(1)
	defer c.Close()
	ctx := context.Background()
	d := make([]time.Duration, n)
	for i := range d {
		t := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return 0, 0, err
		}
		d[i] = time.Since(t)
	}
	slices.Sort(d)
	if n == 0 {
		return 0, 0, errors.New("no samples")
	}
	return d[n/2], d[n*99/100], nil
}

func fmtNs(ns float64) string {
	switch {
	case ns == 0:
		return "-"
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e4:
		return fmt.Sprintf("%.2f us", ns/1e3)
	case ns < 1e6:
		return fmt.Sprintf("%.1f us", ns/1e3)
	default:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
}
