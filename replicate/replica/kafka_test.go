package replica_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/offmap/offmap/replicate/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func openKafka(t *testing.T, path string, c *kfake.Cluster, topic string, cfg replica.Config) *replica.Replica {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	r, err := replica.OpenKafka(path, mapOptions, topic, cfg, kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// syncEqualTopic waits until r has applied everything the topic holds and
// checks that its map equals the topic, read from its start.
func syncEqualTopic(t *testing.T, ctx context.Context, r *replica.Replica, c *kfake.Cluster, topic string) map[string]string {
	t.Helper()
	if err := r.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v (progress %+v)", err, r.Progress())
	}
	want := topicState(t, ctx, c.ListenAddrs(), topic)
	got := map[string]string{}
	for k, v := range r.All() {
		got[string(k)] = string(v)
	}
	if d := diff(want, got); d != "" {
		t.Fatalf("the replica differs from the topic: %s", d)
	}
	return want
}

// producer writes records to the topic directly, as another service would.
func producer(t *testing.T, c *kfake.Cluster) func(ctx context.Context, topic, key string, value []byte) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return func(ctx context.Context, topic, key string, value []byte) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

var compact = map[string]string{"cleanup.policy": "compact"}

// TestKafkaReplica writes through a replica of a compacted topic of three
// partitions and reads back from it, checks that compare-and-set is
// refused, and resumes after a restart from the offsets it keeps.
func TestKafkaReplica(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	c := startKafka(t, 1)
	if err := c.CreateTopic("t", 3, compact); err != nil {
		t.Fatal(err)
	}
	path := mapPath(t, "r")
	r := openKafka(t, path, c, "t", replica.Config{})
	if _, err := replica.OpenKafka(path, mapOptions, "t", replica.Config{}, kgo.SeedBrokers(c.ListenAddrs()...)); !errors.Is(err, replica.ErrBusy) {
		t.Fatalf("a second replica of the map: %v, want ErrBusy", err)
	}
	stop := runReplica(t, r)
	for i := range 40 {
		if err := r.Put(ctx, []byte("k"+strconv.Itoa(i%25)), []byte("v"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Put(ctx, []byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, []byte("k3")); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Get([]byte("k30")); err == nil {
		t.Fatalf("k30 = %q, never written", v)
	}
	if v, err := r.Get([]byte("k7")); err != nil || string(v) != "v32" {
		t.Fatalf("Get k7: %q, %v", v, err)
	}
	if v, err := r.Get([]byte("empty")); err != nil || len(v) != 0 {
		t.Fatalf("an empty value (not a tombstone): %q, %v", v, err)
	}
	if _, err := r.Get([]byte("k3")); !errors.Is(err, replica.ErrNotFound) {
		t.Fatalf("Get k3 after its tombstone: %v", err)
	}
	if _, err := r.Update(ctx, []byte("k1"), []byte("x"), 1); !errors.Is(err, replica.ErrUnsupported) {
		t.Fatalf("Update on Kafka: %v, want ErrUnsupported", err)
	}
	if _, err := r.CompareAndSwap(ctx, []byte("k1"), []byte("v26"), []byte("x")); !errors.Is(err, replica.ErrUnsupported) {
		t.Fatalf("CompareAndSwap on Kafka: %v, want ErrUnsupported", err)
	}
	if err := r.Put(ctx, []byte(replica.StatePrefix), []byte("x")); !errors.Is(err, replica.ErrReservedKey) {
		t.Fatalf("Put of the state key: %v", err)
	}
	want := syncEqualTopic(t, ctx, r, c, "t")
	p := r.Progress()
	if !p.Connected || p.Lag != 0 || p.Applied != 42 || p.Head != 42 || p.Keys != len(want) || p.Resyncs != 1 || p.Engine != "kafka" || p.Source != "t" {
		t.Fatalf("progress %+v; want 42 records applied", p)
	}
	st, err := replica.ReadState(r.Map())
	if err != nil || st.Partitions != 3 || len(st.Offsets) != 3 || st.Offsets[0]+st.Offsets[1]+st.Offsets[2] != 42 || st.CaughtUp.IsZero() {
		t.Fatalf("ReadState: %+v, %v", st, err)
	}
	stop()
	r.Close()

	produce := producer(t, c)
	for i := range 20 {
		if i%5 == 0 {
			produce(ctx, "t", "k"+strconv.Itoa(i), nil)
		} else {
			produce(ctx, "t", "n"+strconv.Itoa(i), []byte("away"))
		}
	}
	produce(ctx, "t", "", []byte("empty key")) // kept, as a compacted topic would
	r = openKafka(t, path, c, "t", replica.Config{})
	runReplica(t, r)
	syncEqualTopic(t, ctx, r, c, "t")
	if p := r.Progress(); p.Resyncs != 0 || p.Applies != 21 {
		t.Fatalf("after resuming: %+v; want no resync and the 21 new records", p)
	}

	// Partitions added under the running replica are consumed too.
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreatePartitions(ctx, 2, "t"); err != nil {
		t.Fatal(err)
	}
	produce = producer(t, c) // a client that knows the new partitions
	for i := range 30 {
		produce(ctx, "t", "p"+strconv.Itoa(i), []byte("more"))
	}
	syncEqualTopic(t, ctx, r, c, "t")
	if st, err := replica.ReadState(r.Map()); err != nil || st.Partitions != 5 {
		t.Fatalf("state after adding partitions: %+v, %v", st, err)
	}
}

// TestKafkaResync resumes replicas whose records are gone from the topic:
// records deleted before the replica applied them (DeleteRecords, as
// retention does); tombstones compacted away while the replica was away
// longer than delete.retention.ms; the topic deleted and created again.
// Each converges on the topic as read from its start.
func TestKafkaResync(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	c := startKafka(t, 1)
	produce := producer(t, c)

	// Records deleted under the replica.
	if err := c.CreateTopic("del", 1, compact); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		produce(ctx, "del", k, []byte(k+"1"))
	}
	path := mapPath(t, "del")
	r := openKafka(t, path, c, "del", replica.Config{})
	stop := runReplica(t, r)
	syncEqualTopic(t, ctx, r, c, "del")
	stop()
	r.Close()
	produce(ctx, "del", "b", nil) // offset 3
	produce(ctx, "del", "d", []byte("d1"))
	if err := c.DeleteRecords("del", 0, 4); err != nil { // b's tombstone with the rest
		t.Fatal(err)
	}
	r = openKafka(t, path, c, "del", replica.Config{})
	stop = runReplica(t, r)
	want := syncEqualTopic(t, ctx, r, c, "del")
	if len(want) != 1 || want["d"] != "d1" || r.Progress().Resyncs != 1 {
		t.Fatalf("the topic holds %v, progress %+v; want d alone, after a resync", want, r.Progress())
	}
	stop()
	r.Close()

	// Tombstones compacted away: delete.retention.ms 0 drops them at the
	// first compaction.
	if err := c.CreateTopic("tomb", 1, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		produce(ctx, "tomb", k, []byte(k+"1"))
	}
	path = mapPath(t, "tomb")
	r = openKafka(t, path, c, "tomb", replica.Config{})
	stop = runReplica(t, r)
	syncEqualTopic(t, ctx, r, c, "tomb")
	stop()
	r.Close()
	produce(ctx, "tomb", "b", nil)
	produce(ctx, "tomb", "a", []byte("a2"))
	produce(ctx, "tomb", "e", []byte("e1")) // the active segment, which compaction leaves
	c.Compact()
	want = topicState(t, ctx, c.ListenAddrs(), "tomb")
	if _, ok := want["b"]; ok || len(want) != 3 {
		t.Fatalf("after compaction the topic holds %v", want)
	}
	r = openKafka(t, path, c, "tomb", replica.Config{})
	stop = runReplica(t, r)
	syncEqualTopic(t, ctx, r, c, "tomb")
	if p := r.Progress(); p.Resyncs != 1 {
		t.Fatalf("progress %+v, want a resync", p)
	}

	// Deleted and created again, under a running replica.
	if err := c.DeleteTopic("tomb"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the replica notices the topic is gone", func() (bool, string) {
		p := r.Progress()
		return p.Err != nil, fmt.Sprintf("%+v", p)
	})
	if err := c.CreateTopic("tomb", 2, compact); err != nil {
		t.Fatal(err)
	}
	producer(t, c)(ctx, "tomb", "f", []byte("f1")) // a new client: the old one knows the old topic's ID
	waitFor(t, 60*time.Second, "the replica follows the new topic", func() (bool, string) {
		_, errA := r.Get([]byte("a"))
		v, _ := r.Get([]byte("f"))
		return errors.Is(errA, replica.ErrNotFound) && string(v) == "f1", fmt.Sprintf("a: %v, f: %q, progress %+v", errA, v, r.Progress())
	})
	syncEqualTopic(t, ctx, r, c, "tomb")
}

// TestKafkaProcesses is TestJetStreamProcesses on a compacted topic of
// three partitions: three replica processes with their own map files,
// writers in two of them and in this process, one replica SIGKILLed and
// restarted, the topic compacted meanwhile, one replica added late; every
// replica must come to hold exactly what the topic holds, read from its
// start.
func TestKafkaProcesses(t *testing.T) {
	ctx := testCtx(t, 150*time.Second)
	c := startKafka(t, 1)
	if err := c.CreateTopic("procs", 3, compact); err != nil {
		t.Fatal(err)
	}
	seeds := c.ListenAddrs()
	urls := seeds[0]
	for _, s := range seeds[1:] {
		urls += "," + s
	}
	produce := producer(t, c)
	for i := range 60 {
		produce(ctx, "procs", "pre"+strconv.Itoa(i), []byte("p"+strconv.Itoa(i)))
	}
	for i := 0; i < 60; i += 7 {
		produce(ctx, "procs", "pre"+strconv.Itoa(i), nil)
	}

	const writes, keys = 150, 30
	paths := map[string]string{"A": mapPath(t, "A"), "B": mapPath(t, "B"), "C": mapPath(t, "C")}
	a := startHelper(t, "A", "kafka", urls, "procs", paths["A"], writes, keys)
	b := startHelper(t, "B", "kafka", urls, "procs", paths["B"], writes, keys)
	a.await("READY", 60*time.Second)
	b.await("READY", 60*time.Second)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		for i := range writes {
			k := "k" + strconv.Itoa(rng.IntN(keys))
			if rng.IntN(4) == 0 {
				produce(ctx, "procs", k, nil)
			} else {
				produce(ctx, "procs", k, []byte("T-"+strconv.Itoa(i)))
			}
		}
	}()

	waitFor(t, 60*time.Second, "A applies records", func() (bool, string) {
		st, err := readState(paths["A"])
		var n int64
		for _, o := range st.Offsets {
			n += o
		}
		return err == nil && !st.Resyncing && n > 100, fmt.Sprintf("%+v %v", st, err)
	})
	a.kill()
	c.Compact()
	a = startHelper(t, "A2", "kafka", urls, "procs", paths["A"], 40, keys)
	a.await("READY", 60*time.Second)
	wg.Wait()
	a.await("WRITES DONE", 90*time.Second)
	b.await("WRITES DONE", 90*time.Second)
	c.Compact()
	late := startHelper(t, "C", "kafka", urls, "procs", paths["C"], 0, keys)
	late.await("READY", 60*time.Second)

	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, "procs")
	if err != nil {
		t.Fatal(err)
	}
	want := topicState(t, ctx, seeds, "procs")
	for name, path := range paths {
		waitFor(t, 60*time.Second, name+" reaches the end of every partition", func() (bool, string) {
			st, err := readState(path)
			if err != nil || st.Resyncing || len(st.Offsets) != 3 {
				return false, fmt.Sprintf("%+v %v", st, err)
			}
			for p, o := range st.Offsets {
				if end, _ := ends.Lookup("procs", int32(p)); o < end.Offset {
					return false, fmt.Sprintf("partition %d at %d, ends at %d", p, o, end.Offset)
				}
			}
			return true, ""
		})
		if d := diff(want, mapState(t, path)); d != "" {
			t.Errorf("replica %s differs from the topic: %s", name, d)
		}
	}
	for _, p := range []*proc{a, b, late} {
		p.stop(30 * time.Second)
	}
}
