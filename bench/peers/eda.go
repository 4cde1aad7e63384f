package peers

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/offmap/offmap/bench/eda"
)

// TransportPeer is a transport the EDA chain runs on.
type TransportPeer struct {
	ID         string // offmap, nats, kafka, redis
	Name       string // as tables show it
	NeedsRedis bool
	// Factory makes eda.Config.Transport; srv is the Redis server, nil
	// when the transport needs none.
	Factory func(srv *RedisServer) func(dir string) (eda.Transport, error)
}

// Transports lists the chain's transports, offmap's queue first.
func Transports() []TransportPeer {
	return []TransportPeer{
		{ID: "offmap", Name: "offmap queue", Factory: func(*RedisServer) func(string) (eda.Transport, error) {
			return func(dir string) (eda.Transport, error) { return &eda.Queues{Dir: dir}, nil }
		}},
		{ID: "nats", Name: "NATS JetStream (file storage)", Factory: func(*RedisServer) func(string) (eda.Transport, error) {
			return func(dir string) (eda.Transport, error) { return NewNATS(dir) }
		}},
		{ID: "kafka", Name: "Kafka protocol: kfake + kgo (stand-in)", Factory: func(*RedisServer) func(string) (eda.Transport, error) {
			return func(dir string) (eda.Transport, error) { return NewKafka(dir) }
		}},
		{ID: "redis", Name: "Redis Streams", NeedsRedis: true, Factory: func(srv *RedisServer) func(string) (eda.Transport, error) {
			return func(string) (eda.Transport, error) { return NewRedisStreams(srv) }
		}},
	}
}

// EDAConfig is the queue comparison: for each transport and wait mode,
// instance counts in order until one fails the SLA.
type EDAConfig struct {
	Warmup    time.Duration
	Runs      int
	RunLength time.Duration
	SLA       time.Duration // p99.9 (corrected) a setting must stay under
	Rate      float64       // messages a second per instance
	// Batch is eda.Config.Batch: the pacer releases due sends at most this
	// often (and offmap's event loops likewise).
	Batch time.Duration
	// OffmapCounts and PeerCounts are the instance counts tried, in order.
	OffmapCounts, PeerCounts []int
	// Only limits the transports (by ID); empty means all.
	Only  []string
	Dir   string
	Redis *RedisServer
	// RedisErr is why there is no Redis server, when Redis is nil.
	RedisErr error
	Log      io.Writer
	// Verbose sends the chain's per-run reports to Log.
	Verbose bool
}

// Sweep is one transport and wait mode, raised until the SLA failed.
type Sweep struct {
	Transport TransportPeer
	Wait      eda.WaitMode
	Results   []*eda.Result
	Best      int    // largest count that met the SLA; 0 if none
	Failed    int    // the count that failed it; 0 if every count passed
	Why       string // why the sweep stopped, when not by the SLA
	Err       error  // the transport could not run at all
}

// Sweeps returns the settings the comparison runs: offmap's queue in its
// event-loop mode and in the Chronicle EDA article's poll-and-sleep loop, every peer in
// the poll-and-sleep loop and with a goroutine blocking per service.
func Sweeps(only []string) []Sweep {
	var out []Sweep
	for _, tr := range Transports() {
		if len(only) > 0 && !contains(only, tr.ID) {
			continue
		}
		modes := []eda.WaitMode{eda.Park, eda.Block}
		if tr.ID == "offmap" {
			modes = []eda.WaitMode{eda.Loop, eda.Park}
		}
		for _, w := range modes {
			out = append(out, Sweep{Transport: tr, Wait: w})
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// Meets reports whether a setting kept p99.9 under the SLA and carried
// every message intact.
func Meets(r *eda.Result, sla time.Duration) bool {
	return r != nil && r.OK() && r.EndToEnd.P999 < int64(sla)
}

// RunEDA runs every sweep and returns them in order.
func RunEDA(ctx context.Context, cfg EDAConfig) []Sweep {
	sweeps := Sweeps(cfg.Only)
	for i := range sweeps {
		s := &sweeps[i]
		counts := cfg.PeerCounts
		if s.Transport.ID == "offmap" {
			counts = cfg.OffmapCounts
		}
		if s.Transport.NeedsRedis && cfg.Redis == nil {
			s.Err = fmt.Errorf("no redis-server: %v", cfg.RedisErr)
			continue
		}
		runSweep(ctx, cfg, s, counts)
		if ctx.Err() != nil {
			break
		}
	}
	return sweeps
}

func runSweep(ctx context.Context, cfg EDAConfig, s *Sweep, counts []int) {
	for _, n := range counts {
		c := eda.Config{
			Instances: n, Rate: cfg.Rate, Wait: s.Wait, Placement: eda.InProcess, Batch: cfg.Batch,
			Warmup: cfg.Warmup, Runs: cfg.Runs, RunLength: cfg.RunLength, Dir: cfg.Dir,
			Transport: s.Transport.Factory(cfg.Redis),
		}
		if s.Transport.NeedsRedis {
			c.BrokerPIDs = []int{cfg.Redis.PID}
		}
		if cfg.Verbose {
			c.Out = cfg.Log
		}
		fmt.Fprintf(cfg.Log, "eda: %s, %s wait, %d instances ...", s.Transport.Name, s.Wait, n)
		start := time.Now()
		r, err := eda.Run(ctx, c)
		if err != nil {
			fmt.Fprintf(cfg.Log, " error after %v: %v\n", time.Since(start).Round(time.Second), err)
			if len(s.Results) == 0 {
				s.Err = err
			} else {
				s.Failed, s.Why = n, fmt.Sprintf("%d instances: %v", n, err)
			}
			return
		}
		s.Results = append(s.Results, r)
		pass := Meets(r, cfg.SLA)
		verdict := "meets the SLA"
		if !pass {
			verdict = "fails the SLA"
			if !r.OK() {
				verdict = fmt.Sprintf("fails: sent %d, delivered %d, bad %d", r.Sent, r.Delivered, r.Bad)
			}
		}
		fmt.Fprintf(cfg.Log, " p50 %s, p99.9 %s, cpu %.0f%%, %s (%v)\n", fmtMS(r.EndToEnd.P50), fmtMS(r.EndToEnd.P999),
			r.CPU.Percent, verdict, time.Since(start).Round(time.Second))
		if !pass {
			s.Failed = n
			return
		}
		s.Best = n
		if ctx.Err() != nil {
			return
		}
	}
}

func fmtMS(ns int64) string { return fmt.Sprintf("%.2f ms", float64(ns)/1e6) }
