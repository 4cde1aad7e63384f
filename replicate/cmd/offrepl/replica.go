package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/internal/promtext"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/replicate/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The names in this file start with "replica": the other commands' files
// share the package.

func init() { commands = append(commands, replicaCommand) }

var replicaCommand = &command{
	name:    "replica",
	summary: "keep a local map equal to a JetStream KV bucket or a compacted Kafka topic",
	help: `Keeps the local map file --map equal to a JetStream key-value bucket
(--nats, --bucket) or a compacted Kafka topic (--kafka, --topic): every
change the engine orders is applied to the map, in the engine's order, so
that this host's processes read the bucket with offmap.Open and Get at
memory speed. Writes go through the engine (the replica package's Put,
Delete and, on JetStream, compare-and-set; or any client of the engine),
never to the map. Deletes, purges, tombstones and the markers JetStream
places when it expires keys are applied as deletes.

The map keeps the last revision applied (keys starting with a zero byte,
"\x00offmap-replica..."; skip them when iterating). After a restart the
replica resumes right after it; when the engine no longer holds the
history after it (purged, compacted, retention, a bucket or topic made
again) it resyncs: it reads the engine's current state and deletes the
local keys the engine no longer has. A kill at any instant loses nothing.
While the engine is unreachable the map keeps serving reads and the
replica retries with back-off. Only one replica may apply to a map (a
lock file, MAP.replica-lock, enforces it).

The bucket is created if missing (--replicas, --history, --ttl,
--marker-ttl; its largest value is --max-value when given), the topic
too, compacted (--partitions, --replication-factor); the first replica
to start creates it, so give every host the same values for these
flags. The map (and its directory) is created if missing, sized by
--entries and the average sizes; it grows as it fills.

The progress line: the revision applied (Kafka: offsets summed over the
partitions), the engine's last, the lag between them, the keys in the
map, and the last error while the engine is failing.`,
	examples: `  # a JetStream cluster's bucket into a map on tmpfs; the bucket made R3 if new
  offrepl replica --map /dev/shm/prices.map --nats nats://a:4222,nats://b:4222,nats://c:4222 --bucket prices --replicas 3
  # credentials and TLS, 10 million keys, expiring as the bucket expires them
  offrepl replica --map /data/users.map --entries 10000000 --avg-key 24 --avg-value 200 --expiring --nats tls://a:4222 --bucket users --creds app.creds --tls-ca ca.pem
  # a compacted Kafka topic, SASL/SCRAM over TLS, progress each second
  offrepl replica --map /dev/shm/config.map --kafka k1:9093,k2:9093 --topic config --sasl scram-sha-512 --user app --password-file pw --tls --progress 1s
  # start over from the engine's state, deleting whatever else the map holds
  offrepl replica --map /dev/shm/prices.map --nats nats://a:4222 --bucket prices --resync --take-over
`,
	setup: replicaSetup,
}

type replicaFlags struct {
	path                          string
	entries, avgKey, avgValue     int
	maxKey, maxValue              int
	maxFileSize                   int64
	expiring                      bool
	natsURLs, bucket              string
	replicas, history             int
	ttl, markerTTL                time.Duration
	kafkaSeeds, topic             string
	partitions, replicationFactor int
	authFlags
	resync, takeOver                  bool
	poll, timeout, retryMin, retryMax time.Duration
}

func replicaSetup(fs *flag.FlagSet) func(ctx context.Context, tick <-chan time.Time, rep *reporter) error {
	f := &replicaFlags{}
	fs.StringVar(&f.path, "map", "", "the local map `FILE` (created if missing)")
	cliargs.CountVar(fs, &f.entries, "entries", 100_000, "entries a new map starts with room for (`N`; it grows)")
	cliargs.IntSizeVar(fs, &f.avgKey, "avg-key", 32, "average key size of a new map, in `BYTES`")
	cliargs.IntSizeVar(fs, &f.avgValue, "avg-value", 256, "average value size of a new map, in `BYTES`")
	cliargs.IntSizeVar(fs, &f.maxKey, "max-key", 0, "largest key of a new map, in `BYTES` (default: max(8 x average, 256))")
	cliargs.IntSizeVar(fs, &f.maxValue, "max-value", 0, "largest value of a new map, in `BYTES` (default: max(8 x average, 256)); also a new bucket's limit")
	cliargs.SizeVar(fs, &f.maxFileSize, "max-file-size", 0, "largest a new map may grow, in `BYTES` (default 1024 x the starting size, 1 GiB to 64 GiB)")
	fs.BoolVar(&f.expiring, "expiring", false, "a new map's entries expire when the bucket expires them (its TTL, a key's own TTL), even before the server's marker comes")
	fs.StringVar(&f.natsURLs, "nats", "", "JetStream server `URLS`, comma-separated")
	fs.StringVar(&f.bucket, "bucket", "", "the key-value bucket's `NAME`")
	fs.IntVar(&f.replicas, "replicas", 1, "`N` copies of a new bucket in the JetStream cluster")
	fs.IntVar(&f.history, "history", 1, "revisions per key a new bucket keeps (`N`)")
	fs.DurationVar(&f.ttl, "ttl", 0, "a new bucket's time to live for keys (`DURATION`; 0: none)")
	fs.DurationVar(&f.markerTTL, "marker-ttl", 0, "a new bucket keeps a delete marker for `DURATION` when it expires a key, so that replicas delete it too (0: no markers; needs nats-server 2.11)")
	fs.StringVar(&f.kafkaSeeds, "kafka", "", "Kafka seed brokers `HOSTS` (host:port, comma-separated)")
	fs.StringVar(&f.topic, "topic", "", "the compacted Kafka `TOPIC`")
	fs.IntVar(&f.partitions, "partitions", 1, "`N` partitions of a new topic")
	fs.IntVar(&f.replicationFactor, "replication-factor", -1, "copies of a new topic's partitions (`N`; -1: the brokers' default)")
	f.authFlags.define(fs)
	fs.BoolVar(&f.resync, "resync", false, "start with a full resync: the engine's current state, deleting local keys it lacks")
	fs.BoolVar(&f.takeOver, "take-over", false, "take a map that is no replica, or replicates another source, deleting what the engine lacks")
	fs.DurationVar(&f.poll, "poll", time.Second, "ask the engine for its head every `INTERVAL` (lag, caught-up time)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound each request to the engine to `DURATION`")
	fs.DurationVar(&f.retryMin, "retry-min", 100*time.Millisecond, "first back-off `INTERVAL` after a failure")
	fs.DurationVar(&f.retryMax, "retry-max", 5*time.Second, "longest back-off `INTERVAL`")
	return func(ctx context.Context, tick <-chan time.Time, rep *reporter) error {
		return f.run(ctx, tick, rep)
	}
}

func (f *replicaFlags) run(ctx context.Context, tick <-chan time.Time, rep *reporter) error {
	report := rep.Line
	if f.path == "" {
		return errors.New("--map is required")
	}
	switch {
	case (f.natsURLs == "") == (f.kafkaSeeds == ""):
		return errors.New("give one of --nats (with --bucket) and --kafka (with --topic)")
	case f.natsURLs != "" && f.bucket == "":
		return errors.New("--nats needs --bucket")
	case f.natsURLs != "" && (f.topic != "" || f.sasl != ""):
		return errors.New("--topic and --sasl are for --kafka")
	case f.kafkaSeeds != "" && f.topic == "":
		return errors.New("--kafka needs --topic")
	case f.kafkaSeeds != "" && (f.bucket != "" || f.creds != ""):
		return errors.New("--bucket and --creds are for --nats")
	}
	opts := offmap.Options{
		Entries: f.entries, AverageKeySize: f.avgKey, AverageValueSize: f.avgValue,
		MaxKeySize: f.maxKey, MaxValueSize: f.maxValue, MaxFileSize: f.maxFileSize, Expiring: f.expiring,
	}
	if _, err := os.Stat(f.path); err == nil {
		opts = offmap.Options{} // the file's own sizes
	}
	cfg := replica.Config{
		Resync: f.resync, TakeOver: f.takeOver, PollInterval: f.poll, Timeout: f.timeout,
		MinBackoff: f.retryMin, MaxBackoff: f.retryMax,
		Logf: func(format string, args ...any) {
			fmt.Fprintln(os.Stderr, time.Now().Format(time.TimeOnly)+" replica: "+message(f.nats.withWaiting(fmt.Sprintf(format, args...))))
		},
	}

	var r *replica.Replica
	var ensure func(context.Context) (string, error) // creates the bucket or topic if missing
	if f.natsURLs != "" {
		auth, err := f.natsOptions(f.natsURLs)
		if err != nil {
			return err
		}
		nopts := append([]nats.Option{nats.Name("offrepl replica " + f.path), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(f.retryMin)}, auth...)
		nc, err := nats.Connect(f.natsURLs, nopts...)
		if err != nil {
			return fmt.Errorf("--nats: %w", err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		if r, err = replica.OpenJetStream(f.path, opts, js, f.bucket, cfg); err != nil {
			return err
		}
		ensure = func(ctx context.Context) (string, error) { return f.ensureBucket(ctx, js) }
	} else {
		auth, err := f.kafkaOptions()
		if err != nil {
			return err
		}
		kopts := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(f.kafkaSeeds, ",")...)}, auth...)
		if r, err = replica.OpenKafka(f.path, opts, f.topic, cfg, kopts...); err != nil {
			return err
		}
		ensure = func(ctx context.Context) (string, error) { return f.ensureTopic(ctx, kopts) }
	}
	defer r.Close()
	rep.Expose(func() []promtext.Sample { return replicaSamples(f.path, r.Progress()) })
	report("started: " + f.nats.withWaiting(replicaLine(r.Progress())))

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx) }()
	ensured := make(chan string, 1)
	go func() { // the replica retries meanwhile: reads never wait for the engine
		for backoff := f.retryMin; ; backoff = min(2*backoff, f.retryMax) {
			rctx, cancel := context.WithTimeout(runCtx, f.timeout)
			what, err := ensure(rctx)
			cancel()
			if err == nil {
				ensured <- what
				return
			}
			select {
			case <-runCtx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}()
	for {
		select {
		case what := <-ensured:
			if what != "" {
				report(what)
			}
		case <-tick:
			report(f.nats.withWaiting(replicaLine(r.Progress())))
		case err := <-ran:
			stop()
			if cerr := r.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				report("stopped: " + replicaLine(r.Progress()))
			}
			return err
		}
	}
}

// replicaLine is the progress line.
func replicaLine(p replica.Progress) string {
	s := fmt.Sprintf("applied %d head %d lag %d keys %d", p.Applied, p.Head, p.Lag, p.Keys)
	if p.Resyncing {
		s += " resyncing"
	}
	if !p.CaughtUp.IsZero() {
		s += " caught-up " + time.Since(p.CaughtUp).Round(time.Millisecond).String() + " ago"
	}
	if p.Err != nil {
		s += " error: " + p.Err.Error()
	}
	return s
}

// ensureBucket creates the bucket if it is missing, and says so.
func (f *replicaFlags) ensureBucket(ctx context.Context, js jetstream.JetStream) (string, error) {
	_, err := js.KeyValue(ctx, f.bucket)
	if err == nil {
		return "", nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", err
	}
	cfg := jetstream.KeyValueConfig{Bucket: f.bucket, Replicas: f.replicas, History: uint8(min(max(f.history, 1), 64)), TTL: f.ttl, LimitMarkerTTL: f.markerTTL, Storage: jetstream.FileStorage}
	if f.maxValue > 0 {
		cfg.MaxValueSize = int32(min(f.maxValue, 1<<30))
	}
	if _, err := js.CreateKeyValue(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		return "", err
	}
	return fmt.Sprintf("created bucket %s (%d replicas)", f.bucket, f.replicas), nil
}

// ensureTopic creates the topic, compacted, if it is missing, and says so.
func (f *replicaFlags) ensureTopic(ctx context.Context, kopts []kgo.Opt) (string, error) {
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, int32(max(f.partitions, 1)), int16(f.replicationFactor), map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, f.topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return "", nil
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("created topic %s (%d partitions, compacted)", f.topic, max(f.partitions, 1)), nil
}
