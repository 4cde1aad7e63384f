package replica_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/replicate/replica"
)

// runReplica runs r until the test ends, and fails the test if Run
// returns an error.
func runReplica(t *testing.T, r *replica.Replica) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func openJS(t *testing.T, path string, js jetstream.JetStream, bucket string, cfg replica.Config) *replica.Replica {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	r, err := replica.OpenJetStream(path, mapOptions, js, bucket, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// syncEqual waits until r has applied everything the bucket holds and
// checks that its map equals the bucket.
func syncEqual(t *testing.T, ctx context.Context, r *replica.Replica, js jetstream.JetStream, kv jetstream.KeyValue) map[string]string {
	t.Helper()
	if err := r.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v (progress %+v)", err, r.Progress())
	}
	want := bucketState(t, ctx, js, kv)
	got := map[string]string{}
	for k, v := range r.All() {
		got[string(k)] = string(v)
	}
	if d := diff(want, got); d != "" {
		t.Fatalf("the replica differs from the bucket: %s", d)
	}
	if r.Len() != len(want) {
		t.Fatalf("Len %d, want %d", r.Len(), len(want))
	}
	return want
}

// TestJetStreamReplica writes through a replica and reads back from it:
// puts, deletes, compare-and-set, read-your-writes through Sync, and the
// errors for reserved and invalid keys, a second replica of the same map
// and a compare-and-set that loses.
func TestJetStreamReplica(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	_, js := startNATS(t, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	path := mapPath(t, "r")
	r := openJS(t, path, js, "b", replica.Config{})
	if _, err := replica.OpenJetStream(path, mapOptions, js, "b", replica.Config{}); !errors.Is(err, replica.ErrBusy) {
		t.Fatalf("a second replica of the map: %v, want ErrBusy", err)
	}
	runReplica(t, r)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); !errors.Is(err, replica.ErrRunning) {
		t.Fatalf("a second Run: %v, want ErrRunning", err)
	}

	for i := range 20 {
		if err := r.Put(ctx, []byte("k"+strconv.Itoa(i)), []byte("v"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Put(ctx, []byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, []byte("k3")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "k4"); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Get([]byte("k7")); err != nil || string(v) != "v7" {
		t.Fatalf("Get k7 after Put and Sync: %q, %v", v, err)
	}
	if v, err := r.Get([]byte("empty")); err != nil || len(v) != 0 {
		t.Fatalf("Get of an empty value: %q, %v", v, err)
	}
	for _, k := range []string{"k3", "k4"} {
		if _, err := r.Get([]byte(k)); !errors.Is(err, replica.ErrNotFound) {
			t.Fatalf("Get %s after delete: %v, want ErrNotFound", k, err)
		}
	}

	// Compare-and-set through the bucket's revisions.
	v, rev, err := r.Entry(ctx, []byte("k1"))
	if err != nil || string(v) != "v1" {
		t.Fatalf("Entry: %q, %v", v, err)
	}
	rev2, err := r.Update(ctx, []byte("k1"), []byte("v1b"), rev)
	if err != nil || rev2 <= rev {
		t.Fatalf("Update at the current revision: %d, %v", rev2, err)
	}
	if _, err := r.Update(ctx, []byte("k1"), []byte("lost"), rev); !errors.Is(err, replica.ErrConflict) {
		t.Fatalf("Update at an old revision: %v, want ErrConflict", err)
	}
	if _, err := r.Update(ctx, []byte("k1"), []byte("lost"), 0); !errors.Is(err, replica.ErrConflict) {
		t.Fatalf("Update (create) of a present key: %v, want ErrConflict", err)
	}
	if _, err := r.Update(ctx, []byte("k3"), []byte("again"), 0); err != nil {
		t.Fatalf("Update (create) of a deleted key: %v", err)
	}
	if ok, err := r.CompareAndSwap(ctx, []byte("k2"), []byte("v2"), []byte("v2b")); !ok || err != nil {
		t.Fatalf("CompareAndSwap with the current value: %v, %v", ok, err)
	}
	if ok, err := r.CompareAndSwap(ctx, []byte("k2"), []byte("v2"), []byte("v2c")); ok || err != nil {
		t.Fatalf("CompareAndSwap with an old value: %v, %v", ok, err)
	}
	if _, _, err := r.Entry(ctx, []byte("k4")); !errors.Is(err, replica.ErrNotFound) {
		t.Fatalf("Entry of a purged key: %v", err)
	}

	// Keys the engine or the replica refuses.
	if err := r.Put(ctx, []byte("a b"), []byte("x")); !errors.Is(err, replica.ErrInvalidKey) {
		t.Fatalf("Put of an invalid key: %v, want ErrInvalidKey", err)
	}
	if err := r.Put(ctx, []byte(replica.StatePrefix+"x"), []byte("x")); !errors.Is(err, replica.ErrReservedKey) {
		t.Fatalf("Put of a reserved key: %v, want ErrReservedKey", err)
	}
	if _, err := r.Get([]byte(replica.StatePrefix)); !errors.Is(err, replica.ErrNotFound) {
		t.Fatalf("Get of the state key: %v, want ErrNotFound", err)
	}

	want := syncEqual(t, ctx, r, js, kv)
	if want["k1"] != "v1b" || want["k2"] != "v2b" || want["k3"] != "again" {
		t.Fatalf("the bucket holds %v", want)
	}
	p := r.Progress()
	if !p.Connected || p.Lag != 0 || p.Applied == 0 || p.Head != p.Applied || p.Keys != len(want) || p.CaughtUp.IsZero() || p.Resyncs != 1 || p.Engine != "jetstream" || p.Source != "KV_b" {
		t.Fatalf("progress %+v", p)
	}
	st, err := replica.ReadState(r.Map())
	if err != nil || st.Applied != p.Applied || st.Resyncing || st.Source != "KV_b" {
		t.Fatalf("ReadState: %+v, %v; progress %+v", st, err, p)
	}

	// A rollup of the whole stream leaves one key, in the stream and in
	// the replica.
	msg := nats.NewMsg("$KV.b.only")
	msg.Header.Set("Nats-Rollup", "all")
	msg.Data = []byte("left")
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if want := syncEqual(t, ctx, r, js, kv); len(want) != 1 || want["only"] != "left" {
		t.Fatalf("after a rollup the bucket holds %v", want)
	}
}

// TestJetStreamResume stops a replica, changes the bucket, and opens the
// map again: the replica resumes after the revision it applied last (no
// resync, exactly the new changes applied) and equals the bucket. The
// map's directory does not exist at first (a new host): Open makes it.
func TestJetStreamResume(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	_, js := startNATS(t, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", History: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := kv.Put(ctx, "k"+strconv.Itoa(i%20), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "hostA", "maps", "r.map")
	r := openJS(t, path, js, "b", replica.Config{})
	stop := runReplica(t, r)
	syncEqual(t, ctx, r, js, kv)
	before := r.Progress()
	stop()
	r.Close()

	// 30 changes while the replica is away, deletes among them.
	for i := range 30 {
		k := "k" + strconv.Itoa(i%25)
		if i%4 == 0 {
			err = kv.Delete(ctx, k)
		} else {
			_, err = kv.Put(ctx, k, []byte("new"+strconv.Itoa(i)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r = openJS(t, path, js, "b", replica.Config{})
	if got := r.Progress().Applied; got != before.Applied {
		t.Fatalf("reopened at revision %d, left at %d", got, before.Applied)
	}
	runReplica(t, r)
	syncEqual(t, ctx, r, js, kv)
	if p := r.Progress(); p.Resyncs != 0 || p.Applies != 30 || p.Applied != before.Applied+30 {
		t.Fatalf("after resuming: %+v; want no resync and the 30 new changes applied", p)
	}
}

// TestJetStreamPurgedHistory resumes replicas whose history is gone: the
// revisions after the one a replica applied were purged while it was
// away; the whole stream was purged while it ran; the bucket was deleted
// and created again. Each converges, deleting the keys the bucket lost.
func TestJetStreamPurgedHistory(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	_, js := startNATS(t, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) uint64 {
		t.Helper()
		rev, err := kv.Put(ctx, k, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	for _, k := range []string{"a", "b", "c", "x"} {
		put(k, k+"1")
	}
	path := mapPath(t, "r")
	r := openJS(t, path, js, "b", replica.Config{})
	stop := runReplica(t, r)
	syncEqual(t, ctx, r, js, kv)
	stop()
	r.Close()

	// Away: b deleted, d added, a changed, y0-y3 added and deleted; then
	// everything before d purged (c, x and b's delete marker with it).
	// The stream keeps more subjects (a, d, y0-y3) than the map has keys
	// (a, b, c, d, x), so only the gap in the history tells.
	if err := kv.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	revD := put("d", "d1")
	put("a", "a2")
	for i := range 4 {
		put("y"+strconv.Itoa(i), "y")
		if err := kv.Delete(ctx, "y"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, "KV_b")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(revD)); err != nil {
		t.Fatal(err)
	}
	r = openJS(t, path, js, "b", replica.Config{})
	runReplica(t, r)
	want := syncEqual(t, ctx, r, js, kv)
	if len(want) != 2 || want["a"] != "a2" || want["d"] != "d1" {
		t.Fatalf("the bucket holds %v, want a and d", want)
	}
	if p := r.Progress(); p.Resyncs != 1 {
		t.Fatalf("resyncs %d, want 1: %+v", p.Resyncs, p)
	}

	// Purged while the replica runs, caught up: no marker reaches it.
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the replica empties after the stream purge", func() (bool, string) {
		return r.Len() == 0, fmt.Sprintf("%d keys, progress %+v", r.Len(), r.Progress())
	})
	put("e", "e1")
	syncEqual(t, ctx, r, js, kv)

	// Deleted and created again: its revisions start over.
	if err := js.DeleteKeyValue(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	put("f", "f1")
	waitFor(t, 60*time.Second, "the replica follows the new bucket", func() (bool, string) {
		_, errE := r.Get([]byte("e"))
		v, errF := r.Get([]byte("f"))
		return errors.Is(errE, replica.ErrNotFound) && string(v) == "f1", fmt.Sprintf("e: %v, f: %q %v, progress %+v", errE, v, errF, r.Progress())
	})
	syncEqual(t, ctx, r, js, kv)
}

// TestJetStreamUnreachable stops the only server under a running
// replica: local reads go on, Progress shows the disconnection, writes
// fail; when the server is back, the replica catches up.
func TestJetStreamUnreachable(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	c, js := startNATS(t, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	r := openJS(t, mapPath(t, "r"), js, "b", replica.Config{MaxBackoff: 200 * time.Millisecond, Timeout: time.Second})
	runReplica(t, r)
	syncEqual(t, ctx, r, js, kv)

	c.Stop(0)
	waitFor(t, 30*time.Second, "Progress shows the engine unreachable", func() (bool, string) {
		p := r.Progress()
		return !p.Connected && p.Err != nil, fmt.Sprintf("%+v", p)
	})
	if v, err := r.Get([]byte("k")); err != nil || string(v) != "1" {
		t.Fatalf("local read with the engine down: %q, %v", v, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = r.Put(wctx, []byte("k"), []byte("2"))
	cancel()
	if err == nil {
		t.Fatal("Put with the engine down succeeded")
	}
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.Put(wctx, []byte("k"), []byte("3"))
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Put after the server came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	syncEqual(t, ctx, r, js, kv)
	if v, _ := r.Get([]byte("k")); string(v) != "3" {
		t.Fatalf("k = %q after the server came back, want 3", v)
	}
	if p := r.Progress(); !p.Connected || p.Err != nil {
		t.Fatalf("progress after the server came back: %+v", p)
	}
}

// TestJetStreamExpiry replicates what the engine expires: a key created
// with its own TTL in a bucket with limit markers is deleted by the
// marker the server places; a map whose entries may expire lets the key
// expire on its own at the engine's time, even with the replica stopped.
func TestJetStreamExpiry(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	_, js := startNATS(t, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", LimitMarkerTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "stays", []byte("1")); err != nil {
		t.Fatal(err)
	}
	opts := mapOptions
	opts.Expiring = true
	expiring, err := replica.OpenJetStream(mapPath(t, "expiring"), opts, js, "b", replica.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer expiring.Close()
	plain := openJS(t, mapPath(t, "plain"), js, "b", replica.Config{})
	runReplica(t, plain)
	stopExpiring := runReplica(t, expiring)

	const ttl = 4 * time.Second
	created := time.Now()
	if _, err := kv.Create(ctx, "short", []byte("x"), jetstream.KeyTTL(ttl)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*replica.Replica{plain, expiring} {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := r.Get([]byte("short")); (err != nil || string(v) != "x") && time.Since(created) < ttl-time.Second {
			t.Fatalf("short before its TTL: %q, %v", v, err)
		}
	}
	// The expiring map needs no marker: stopped, it still expires the key.
	stopExpiring()
	time.Sleep(time.Until(created.Add(ttl + 100*time.Millisecond)))
	if _, err := expiring.Get([]byte("short")); !errors.Is(err, replica.ErrNotFound) {
		t.Fatalf("short after its TTL in the expiring map, replica stopped: %v", err)
	}
	// The plain map deletes it when the server's marker comes.
	waitFor(t, 30*time.Second, "the marker deletes the key", func() (bool, string) {
		_, err := plain.Get([]byte("short"))
		return errors.Is(err, replica.ErrNotFound), fmt.Sprint(err)
	})
	syncEqual(t, ctx, plain, js, kv)
	if v, err := plain.Get([]byte("stays")); err != nil || string(v) != "1" {
		t.Fatalf("stays: %q, %v", v, err)
	}
}

// TestOpenRefuses checks that Open keeps a map it did not make: one with
// keys but no replica state, or one that replicates another bucket,
// unless told to take it over.
func TestOpenRefuses(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	_, js := startNATS(t, 1)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	path := mapPath(t, "r")
	m, err := offmap.Open(path, mapOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Put([]byte("mine"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.ReadState(m); !errors.Is(err, replica.ErrNotReplica) {
		t.Fatalf("ReadState of a plain map: %v", err)
	}
	m.Close()
	if _, err := replica.OpenJetStream(path, mapOptions, js, "b", replica.Config{}); !errors.Is(err, replica.ErrNotReplica) {
		t.Fatalf("Open of a map with keys and no state: %v, want ErrNotReplica", err)
	}
	if v := mapState(t, path); v["mine"] != "1" {
		t.Fatalf("the refused map lost its key: %v", v)
	}
	r := openJS(t, path, js, "b", replica.Config{TakeOver: true})
	stop := runReplica(t, r)
	syncEqual(t, ctx, r, js, kv) // "mine" is gone
	stop()
	r.Close()
	if _, err := replica.OpenJetStream(path, mapOptions, js, "other", replica.Config{}); !errors.Is(err, replica.ErrOtherSource) {
		t.Fatalf("Open for another bucket: %v, want ErrOtherSource", err)
	}
	if _, err := replica.OpenJetStream(path, mapOptions, nil, "b", replica.Config{}); err == nil {
		t.Fatal("Open with no JetStream handle succeeded")
	}
	if _, err := replica.OpenJetStream(path, mapOptions, js, "a.b", replica.Config{}); err == nil {
		t.Fatal("Open with a bad bucket name succeeded")
	}
}
