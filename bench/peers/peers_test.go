package peers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/offmap/offmap/bench/eda"
)

// redisSrv is the redis-server of the test binary, started on first use.
var redisSrv struct {
	srv *RedisServer
	err error
	on  bool
}

func testRedis(t *testing.T) *RedisServer {
	t.Helper()
	if !redisSrv.on {
		redisSrv.on = true
		redisSrv.srv, redisSrv.err = StartRedis(testLog{t})
	}
	if redisSrv.err != nil {
		if errors.Is(redisSrv.err, ErrNoRedis) {
			t.Skipf("Redis skipped: redis-server could not be installed or started: %v", redisSrv.err)
		}
		t.Fatal(redisSrv.err)
	}
	return redisSrv.srv
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		os.Exit(ChildMain(os.Args[1:]))
	}
	code := m.Run()
	if redisSrv.srv != nil {
		if err := redisSrv.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping redis-server:", err)
		}
	}
	os.Exit(code)
}

// TestTransports passes a few messages through the EDA chain on every
// transport, in both wait modes the peers run, and checks that every
// message arrived intact and every counter matched.
func TestTransports(t *testing.T) {
	for _, tr := range Transports() {
		for _, w := range []eda.WaitMode{eda.Park, eda.Block} {
			t.Run(tr.Name+"/"+w.String(), func(t *testing.T) {
				var srv *RedisServer
				if tr.NeedsRedis {
					srv = testRedis(t)
				}
				cfg := eda.Config{
					Instances: 2, Wait: w, Placement: eda.InProcess,
					Warmup: 100 * time.Millisecond, Runs: 1, RunLength: 300 * time.Millisecond,
					Grace: 20 * time.Second, Dir: t.TempDir(),
					Transport: tr.Factory(srv),
				}
				if srv != nil {
					cfg.BrokerPIDs = []int{srv.PID}
				}
				r, err := eda.Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if !r.OK() || r.Messages() == 0 {
					t.Fatalf("sent %d, delivered %d, bad %d, measured %d, counter errors %v",
						r.Sent, r.Delivered, r.Bad, r.Messages(), r.CounterErrors)
				}
				t.Logf("%s: %d messages, p50 %.3f ms, p99.9 %.3f ms, cpu %.1f%%", r.Transport, r.Sent,
					float64(r.EndToEnd.P50)/1e6, float64(r.EndToEnd.P999)/1e6, r.CPU.Percent)
			})
		}
	}
}

// TestMapPeers runs every map peer on a small map: each workload, then
// every entry read back and compared (RunMaps fails the peer otherwise),
// and the two-process counters with the exact sum checked.
func TestMapPeers(t *testing.T) {
	for _, p := range MapPeers() {
		t.Run(p.ID, func(t *testing.T) {
			cfg := MapConfig{
				Entries: 3000, Budget: 500 * time.Millisecond, Counters: 100, Increments: 4000,
				TwoBudget: time.Second, Only: []string{p.ID}, Dir: t.TempDir(), Log: testLog{t},
			}
			if p.NeedsRedis {
				cfg.Redis = testRedis(t)
			}
			rs := RunMaps(context.Background(), cfg)
			if len(rs) != 1 {
				t.Fatalf("%d results", len(rs))
			}
			r := rs[0]
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r.Verified != cfg.Entries {
				t.Fatalf("%d entries verified, want %d", r.Verified, cfg.Entries)
			}
			for k := range workloads {
				if p.Runs[k] && r.Cells[k].Ops == 0 {
					t.Fatalf("%s: no operation measured", WorkloadNames[k])
				}
			}
			if p.Disk && r.Allocated == 0 {
				t.Fatal("no size on disk")
			}
			switch {
			case p.Counters != "":
				if r.Two.Err != nil || !r.Two.Checked {
					t.Fatalf("two processes: %+v", r.Two)
				}
			case r.Two.Cannot == "":
				t.Fatal("no reason given why two processes cannot share the peer")
			}
			t.Logf("%s: get %s, incr %s, two processes %q %.0f/s", p.Name, fmtNs(r.Cells[Get].NsPerOp()),
				fmtNs(r.Cells[Incr].NsPerOp()), r.Two.Cannot, r.Two.Rate())
		})
	}
}

// TestStoresMissing checks that every store reports an absent key as
// absent, and that Incr and Put round-trip.
func TestStoresMissing(t *testing.T) {
	for _, p := range MapPeers() {
		t.Run(p.ID, func(t *testing.T) {
			var srv *RedisServer
			if p.NeedsRedis {
				srv = testRedis(t)
			}
			s, err := p.Open(t.TempDir(), 100, srv)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Get([]byte("key-absent")); !errors.Is(err, errMissing) {
				t.Fatalf("Get of an absent key: %v", err)
			}
			k := []byte("key-000000000042")
			if err := s.Put(k, 41); err != nil {
				t.Fatal(err)
			}
			if err := s.Incr(k); err != nil {
				t.Fatal(err)
			}
			if v, err := s.Get(k); err != nil || v != 42 {
				t.Fatalf("Get = %d, %v; want 42", v, err)
			}
		})
	}
}
