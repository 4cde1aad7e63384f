package replica_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamProcesses runs three replica processes, each with its own
// map file as on its own host, on an R3 bucket of a three-node cluster.
// Writers go through the engine at once: two of the replica processes
// (puts, deletes, compare-and-set), and this process (puts and deletes,
// and compare-and-set increments of a counter that must lose none). One
// replica is SIGKILLed mid-run and restarted on its map, a cluster node
// is stopped and started again, and the third replica is added late, on
// a new map. Once the writes are acknowledged, every replica must come to
// hold exactly the bucket's keys and values, read from the engine.
func TestJetStreamProcesses(t *testing.T) {
	ctx := testCtx(t, 150*time.Second)
	c, js := startNATS(t, 3)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "procs", Replicas: 3, History: 3, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	// Keys the late replica must catch up on, some deleted.
	for i := range 60 {
		if _, err := kv.Put(ctx, "pre"+strconv.Itoa(i), []byte("p"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 60; i += 7 {
		if err := kv.Delete(ctx, "pre"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}

	const writes, keys = 150, 30
	paths := map[string]string{"A": mapPath(t, "A"), "B": mapPath(t, "B"), "C": mapPath(t, "C")}
	a := startHelper(t, "A", "jetstream", c.URLs(), "procs", paths["A"], writes, keys)
	b := startHelper(t, "B", "jetstream", c.URLs(), "procs", paths["B"], writes, keys)
	a.await("READY", 60*time.Second)
	b.await("READY", 60*time.Second)

	// This process's writers.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	// Each request has its own deadline: a request in flight to the node
	// that is stopped gets no answer.
	retry := func(f func(ctx context.Context) error) error {
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := f(rctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range writes {
			k := "k" + strconv.Itoa(rng.IntN(keys))
			err := retry(func(ctx context.Context) error {
				if rng.IntN(4) == 0 {
					return kv.Delete(ctx, k)
				}
				_, err := kv.Put(ctx, k, []byte("T-"+strconv.Itoa(i)))
				return err
			})
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	const incrementers, increments = 2, 25
	var ambiguous atomic.Int64
	for range incrementers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range increments {
				err := retry(func(ctx context.Context) error {
					var n int
					var rev uint64
					e, err := kv.Get(ctx, "counter")
					if err == nil {
						n, _ = strconv.Atoi(string(e.Value()))
						rev = e.Revision()
					} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
						return err
					}
					next := []byte(strconv.Itoa(n + 1))
					if rev == 0 {
						_, err = kv.Create(ctx, "counter", next)
					} else {
						_, err = kv.Update(ctx, "counter", next, rev)
					}
					if errors.Is(err, context.DeadlineExceeded) {
						ambiguous.Add(1) // it may have been stored: one more increment
					}
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}

	// Kill A once it has applied some of the changes, and restart it on
	// its map; stop a node meanwhile.
	waitFor(t, 60*time.Second, "A applies changes", func() (bool, string) {
		st, err := readState(paths["A"])
		return err == nil && !st.Resyncing && st.Applied > 100, fmt.Sprintf("%+v %v", st, err)
	})
	a.kill()
	killedAt, err := readState(paths["A"])
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(2)
	a = startHelper(t, "A2", "jetstream", c.URLs(), "procs", paths["A"], 40, keys)
	a.await("READY", 60*time.Second)
	if err := c.Start(2); err != nil {
		t.Fatal(err)
	}

	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	a.await("WRITES DONE", 90*time.Second)
	b.await("WRITES DONE", 90*time.Second)
	late := startHelper(t, "C", "jetstream", c.URLs(), "procs", paths["C"], 0, keys)
	late.await("READY", 60*time.Second)

	// Quiescence: every write is acknowledged. The replicas must reach
	// the stream's last revision and then hold what the bucket holds.
	s, err := js.Stream(ctx, "KV_procs")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq
	want := bucketState(t, ctx, js, kv)
	if n, _ := strconv.Atoi(want["counter"]); n < incrementers*increments || n > incrementers*increments+int(ambiguous.Load()) {
		debugDiff(t, ctx, kv, s, map[string]string{"counter": "x"}, nil)
		t.Fatalf("counter = %q in the bucket, want %d (+ up to %d requests that timed out): compare-and-set lost or doubled an increment", want["counter"], incrementers*increments, ambiguous.Load())
	}
	for name, path := range paths {
		waitFor(t, 60*time.Second, name+" reaches the last revision", func() (bool, string) {
			st, err := readState(path)
			return err == nil && !st.Resyncing && st.Applied >= last, fmt.Sprintf("%+v %v, want applied %d", st, err, last)
		})
		if d := diff(want, mapState(t, path)); d != "" {
			t.Errorf("replica %s differs from the bucket: %s", name, d)
			debugDiff(t, ctx, kv, s, want, mapState(t, path))
		}
	}
	st, _ := readState(paths["A"])
	if st.Applied < killedAt.Applied {
		t.Errorf("A restarted below the revision it was killed at: %d < %d", st.Applied, killedAt.Applied)
	}
	for _, p := range []*proc{a, b, late} {
		p.stop(30 * time.Second)
	}
}

// TestJetStreamKilled SIGKILLs a replica process again and again while it
// applies a stream of puts of distinct keys, and checks after each kill
// that the map never claims a revision whose change it does not hold:
// every key put at or before the revision the map's state names must be
// in the map with its value. The last run must then catch up exactly.
func TestJetStreamKilled(t *testing.T) {
	ctx := testCtx(t, 150*time.Second)
	c, js := startNATS(t, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "killed"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	keyAt := map[uint64]string{} // revision -> key put there
	put := func(i int) {
		k := "u" + strconv.Itoa(i)
		rev, err := kv.Put(ctx, k, []byte("v"+k))
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		keyAt[rev] = k
		mu.Unlock()
	}
	for i := range 500 {
		put(i)
	}
	// Keep writing while the replica is killed and restarted, so that
	// every kill lands while it applies.
	stopWriting := make(chan struct{})
	written := make(chan int)
	go func() {
		i := 500
		defer func() { written <- i }()
		tick := time.NewTicker(2 * time.Millisecond) // about 500 a second at most
		defer tick.Stop()
		for {
			select {
			case <-stopWriting:
				return
			case <-tick.C:
			}
			put(i)
			i++
		}
	}()

	path := mapPath(t, "r")
	rng := rand.New(rand.NewPCG(3, 4))
	var prev uint64
	for round := range 6 {
		roundStart := time.Now()
		p := startHelper(t, "K"+strconv.Itoa(round), "jetstream", c.URLs(), "killed", path, 0, 0)
		p.await("READY", 60*time.Second)
		// Kill it while it applies: once it is past where it was killed.
		waitFor(t, 60*time.Second, "the replica applies changes", func() (bool, string) {
			st, err := readState(path)
			return err == nil && !st.Resyncing && st.Applied > prev, fmt.Sprintf("%+v %v", st, err)
		})
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		p.kill()
		st, err := readState(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Resyncing {
			continue // the first catch-up; the map claims nothing
		}
		if st.Applied < prev {
			t.Fatalf("round %d: the map went back from revision %d to %d", round, prev, st.Applied)
		}
		prev = st.Applied
		got := mapState(t, path)
		mu.Lock()
		for rev, k := range keyAt {
			if rev <= st.Applied && got[k] != "v"+k {
				mu.Unlock()
				t.Fatalf("round %d: the map claims revision %d but key %s, put at revision %d, is %q", round, st.Applied, k, rev, got[k])
			}
		}
		mu.Unlock()
		t.Logf("round %d: killed at revision %d, %d keys (%v)", round, st.Applied, len(got), time.Since(roundStart))
	}
	close(stopWriting)
	n := <-written
	p := startHelper(t, "final", "jetstream", c.URLs(), "killed", path, 0, 0)
	p.await("READY", 60*time.Second)
	s, err := js.Stream(ctx, "KV_killed")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the last run catches up", func() (bool, string) {
		st, err := readState(path)
		return err == nil && !st.Resyncing && st.Applied >= info.State.LastSeq, fmt.Sprintf("%+v %v", st, err)
	})
	got := mapState(t, path)
	if len(got) != n {
		t.Errorf("the map holds %d keys, want %d", len(got), n)
	}
	if d := diff(bucketState(t, ctx, js, kv), got); d != "" {
		t.Errorf("the map differs from the bucket: %s", d)
	}
	p.stop(30 * time.Second)
}

func debugDiff(t *testing.T, ctx context.Context, kv jetstream.KeyValue, s jetstream.Stream, want, got map[string]string) {
	info, err := s.Info(ctx)
	if err == nil {
		t.Logf("stream now: %+v", info.State)
	}
	for k := range want {
		if got[k] == want[k] {
			continue
		}
		h, err := kv.History(ctx, k)
		if err != nil {
			t.Logf("history %s: %v", k, err)
			continue
		}
		for _, e := range h {
			t.Logf("  %s rev %d op %v %q at %v", k, e.Revision(), e.Operation(), e.Value(), e.Created())
		}
	}
}
