package replica_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/replica"
)

// The Get benchmarks compare a replica's Get with a plain local map's, on
// maps of the same sizes holding the same keys and values: benchKeys keys
// of 16 bytes, values of 64. The replica is filled through JetStream (an
// embedded server) and runs while it is read.
const benchKeys = 50_000

var benchOptions = offmap.Options{Entries: benchKeys, AverageKeySize: 16, AverageValueSize: 64}

type benchSetup struct {
	plain   *offmap.Map
	rep     *replica.Replica
	repFile *offmap.Map // the replica's file, opened as another process would
	js      jetstream.JetStream
	keys    [][]byte // in a random order
}

var (
	benchDir  string
	benchOnce sync.Once
	bench     *benchSetup
	benchErr  error
)

// setupBench builds the maps once per test binary run, in a directory
// that TestMain removes at the end (benchmarks' TempDirs go after each).
func setupBench(b *testing.B) *benchSetup {
	benchOnce.Do(func() {
		if benchDir, benchErr = os.MkdirTemp("", "replica-bench"); benchErr == nil {
			bench, benchErr = newBench(benchDir)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return bench
}

func newBench(dir string) (*benchSetup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := &benchSetup{}
	servers, err := enginetest.StartNATS(filepath.Join(dir, "nats"), 1)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(servers.URLs())
	if err != nil {
		return nil, err
	}
	if s.js, err = jetstream.New(nc); err != nil {
		return nil, err
	}
	if _, err := s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "bench"}); err != nil {
		return nil, err
	}
	if s.plain, err = offmap.Open(filepath.Join(dir, "plain.map"), benchOptions); err != nil {
		return nil, err
	}
	value := make([]byte, 64)
	var acks []jetstream.PubAckFuture
	for i := range benchKeys {
		k := fmt.Appendf(nil, "key-%012d", i)
		copy(value, fmt.Sprintf("value of %d", i))
		s.keys = append(s.keys, k)
		if err := s.plain.Put(k, value); err != nil {
			return nil, err
		}
		a, err := s.js.PublishAsync("$KV.bench."+string(k), append([]byte(nil), value...))
		if err != nil {
			return nil, err
		}
		acks = append(acks, a)
		if i%1000 == 999 {
			select {
			case <-s.js.PublishAsyncComplete():
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(s.keys), func(i, j int) { s.keys[i], s.keys[j] = s.keys[j], s.keys[i] })
	path := filepath.Join(dir, "replica.map")
	if s.rep, err = replica.OpenJetStream(path, benchOptions, s.js, "bench", replica.Config{}); err != nil {
		return nil, err
	}
	go s.rep.Run(context.Background())
	if err := s.rep.Sync(ctx); err != nil {
		return nil, err
	}
	if n := s.rep.Len(); n != benchKeys {
		return nil, fmt.Errorf("the replica holds %d keys, want %d", n, benchKeys)
	}
	if s.repFile, err = offmap.Open(path, offmap.Options{}); err != nil {
		return nil, err
	}
	return s, nil
}

// getLoop gets n keys from the start-th on, reusing a buffer as a reader
// in a hot loop would.
func getLoop(get func(dst, key []byte) ([]byte, error), keys [][]byte, start, n int) error {
	buf := make([]byte, 0, 128)
	var err error
	for i := range n {
		if buf, err = get(buf[:0], keys[(start+i)%len(keys)]); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkGet: offmap's AppendValue on a plain map, on the replica
// (Replica.AppendValue), and on the replica's file opened with offmap as
// another process does; then the replica's while it applies a stream of
// updates (2000 a second) published to the bucket.
func BenchmarkGet(b *testing.B) {
	s := setupBench(b)
	for _, bc := range []struct {
		name string
		get  func(dst, key []byte) ([]byte, error)
	}{
		{"plain", s.plain.AppendValue},
		{"replica", s.rep.AppendValue},
		{"replica-file", s.repFile.AppendValue},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			if err := getLoop(bc.get, s.keys, 0, b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("replica-applying", func(b *testing.B) {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // updates to the replica's keys, through the engine
			defer close(done)
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			value := make([]byte, 64)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				for j := range 2 {
					s.js.PublishAsync("$KV.bench."+string(s.keys[(2*i+j)%len(s.keys)]), value)
				}
			}
		}()
		b.ReportAllocs()
		b.ResetTimer()
		err := getLoop(s.rep.AppendValue, s.keys, 0, b.N)
		b.StopTimer()
		close(stop)
		<-done
		if err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkGetRatio measures the replica's Get and the plain map's in one
// run, alternating chunks of 4096 keys (about a millisecond each) so that
// both see the same machine, and reports each one's ns/get and
// replica/plain: the median over the pairs of chunks of the ratio of
// their times, which a preemption or another process's burst in one chunk
// moves little (1 is the goal: a replica's reads are a local map's).
func BenchmarkGetRatio(b *testing.B) {
	s := setupBench(b)
	const chunk = 4096
	var plain, rep time.Duration
	var ratios []float64
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		first, second := s.plain.AppendValue, s.rep.AppendValue
		swapped := (done/chunk)%2 == 1
		if swapped {
			first, second = second, first
		}
		t0 := time.Now()
		if err := getLoop(first, s.keys, done, n); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := getLoop(second, s.keys, done, n); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		p, r := t1.Sub(t0), t2.Sub(t1)
		if swapped {
			p, r = r, p
		}
		plain += p
		rep += r
		if n == chunk {
			ratios = append(ratios, float64(r)/float64(p))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "plain-ns/get")
	b.ReportMetric(float64(rep.Nanoseconds())/float64(b.N), "replica-ns/get")
	if len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "replica/plain")
	}
}
