package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/internal/promtext"
	"github.com/offmap/offmap/replicate/mirror"
)

// The names in this file start with "mirror": the other commands' files
// share the package.

func init() { commands = append(commands, mirrorCommand) }

var mirrorCommand = &command{
	name:    "mirror",
	summary: "copy a local queue to a JetStream stream or a Kafka partition",
	help: `Copies every message of the local queue --queue, in order, to a JetStream
stream (--nats, --stream, --subject) or to one partition of a Kafka topic
(--kafka, --topic, --partition), with two headers: Offmap-Source (--source)
and Offmap-Index (the queue index). The queue's named tailer --name records
what the engine acknowledged; on start, and after any error, the mirror
asks the engine for the last message of --source it holds and resumes
after it: no message lost and none stored twice, even after a kill at any
instant. Appenders never wait for the mirror: while the engine is down or
slow, the mirror retries with back-off and the queue keeps growing; the
progress line shows the lag.

JetStream: the stream must be written by this mirror alone (one stream
per source); it is created if missing, on --subject, with --replicas.
Kafka: the topic must exist; the mirror produces in transactions, so
consumers should read with isolation level read_committed. Run one mirror
per queue and --name (a lock file, .mirror-NAME.lock, enforces it).

The progress line: sent (published, resends included), acked (recorded
in the tailer), lag (messages in the queue not yet acknowledged), and the
last error while the engine is failing.`,
	examples: `  # a queue on tmpfs to a replicated JetStream stream, created if missing
  offrepl mirror --queue /dev/shm/orders --source host-a/orders --nats nats://a:4222,nats://b:4222 --stream ORDERS_HOST_A --subject orders.host-a --replicas 3
  # with credentials and TLS
  offrepl mirror --queue /dev/shm/orders --source host-a/orders --nats tls://a:4222 --stream ORDERS_HOST_A --subject orders.host-a --creds app.creds --tls-ca ca.pem
  # to partition 3 of a Kafka topic, SASL/SCRAM over TLS, progress each second
  offrepl mirror --queue /data/q/clicks --source host-a/clicks --kafka k1:9093,k2:9093 --topic clicks --partition 3 --sasl scram-sha-512 --user app --password-file pw --tls --progress 1s
`,
	setup: mirrorSetup,
}

type mirrorFlags struct {
	dir, name, source           string
	natsURLs, stream, subject   string
	replicas                    int
	kafkaSeeds, topic, txnID    string
	partition                   int
	window                      int
	timeout, retryMin, retryMax time.Duration
	authFlags
}

func mirrorSetup(fs *flag.FlagSet) func(ctx context.Context, tick <-chan time.Time, rep *reporter) error {
	f := &mirrorFlags{}
	fs.StringVar(&f.dir, "queue", "", "the local queue's `DIR`")
	fs.StringVar(&f.name, "name", "mirror", "the queue's named tailer that records what the engine acknowledged: `NAME`")
	fs.StringVar(&f.source, "source", "", "this queue's identity at the engine, stable across restarts: `ID`")
	fs.StringVar(&f.natsURLs, "nats", "", "JetStream server `URLS`, comma-separated")
	fs.StringVar(&f.stream, "stream", "", "the JetStream stream's `NAME`")
	fs.StringVar(&f.subject, "subject", "", "publish on `SUBJECT`")
	fs.IntVar(&f.replicas, "replicas", 1, "replicas of the stream when it must be created: `N`")
	fs.StringVar(&f.kafkaSeeds, "kafka", "", "Kafka seed brokers `HOSTS` (host:port, comma-separated)")
	fs.StringVar(&f.topic, "topic", "", "the Kafka `TOPIC`")
	fs.IntVar(&f.partition, "partition", 0, "the topic's `PARTITION`")
	fs.StringVar(&f.txnID, "transactional-id", "", "the Kafka producer's transactional `ID` (default offmap-mirror/SOURCE/TOPIC/PARTITION)")
	cliargs.CountVar(fs, &f.window, "window", 8192, "messages in flight (for Kafka, per transaction): `N`")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "wait for the engine at most `INTERVAL` before retrying")
	fs.DurationVar(&f.retryMin, "retry-min", 100*time.Millisecond, "first back-off `INTERVAL` after a failure")
	fs.DurationVar(&f.retryMax, "retry-max", 5*time.Second, "longest back-off `INTERVAL`")
	f.authFlags.define(fs)
	return func(ctx context.Context, tick <-chan time.Time, rep *reporter) error {
		report := rep.Line
		m, err := f.mirror(ctx, report)
		if err != nil || m == nil {
			return err
		}
		rep.Expose(func() []promtext.Sample { return mirrorSamples(f.dir, m.Progress()) })
		report("started: " + mirrorLine(m.Progress()))
		ran := make(chan error, 1)
		go func() { ran <- m.Run(ctx) }()
		for {
			select {
			case <-tick:
				report(f.nats.withWaiting(mirrorLine(m.Progress())))
			case err := <-ran:
				if err == nil {
					report("stopped: " + mirrorLine(m.Progress()))
				}
				return err
			}
		}
	}
}

// mirrorLine is the progress line.
func mirrorLine(p mirror.Progress) string {
	s := fmt.Sprintf("sent %d, acked %d, lag %d", p.Sent, p.Acked, p.Lag)
	if p.Duplicates > 0 {
		s += fmt.Sprintf(", duplicates %d", p.Duplicates)
	}
	if p.Restarts > 0 {
		s += fmt.Sprintf(", restarts %d", p.Restarts)
	}
	if p.Err != nil {
		s += ", failing: " + p.Err.Error()
	}
	return s
}

// mirror builds the mirror the flags describe, creating the JetStream
// stream if it is missing. It returns a nil mirror when ctx ended while
// waiting for the server.
func (f *mirrorFlags) mirror(ctx context.Context, report func(string)) (*mirror.Mirror, error) {
	if f.dir == "" || f.source == "" {
		return nil, errors.New("--queue and --source are required")
	}
	if _, err := os.Stat(filepath.Join(f.dir, "queue.meta")); err != nil {
		return nil, fmt.Errorf("--queue %s: not a queue: %w", f.dir, err)
	}
	cfg := mirror.Config{
		Dir: f.dir, TailerName: f.name, SourceID: f.source,
		MaxInFlight: f.window, Timeout: f.timeout, RetryMin: f.retryMin, RetryMax: f.retryMax,
		OnError: func(err error) {
			fmt.Fprintf(os.Stderr, "%s mirror: %s\n", time.Now().Format(time.TimeOnly), message(f.nats.withWaiting(err.Error())))
		},
	}
	switch {
	case (f.natsURLs == "") == (f.kafkaSeeds == ""):
		return nil, errors.New("give one of --nats (with --stream and --subject) and --kafka (with --topic)")
	case f.natsURLs != "":
		if f.stream == "" || f.subject == "" {
			return nil, errors.New("--nats needs --stream and --subject")
		}
		if f.topic != "" || f.sasl != "" || f.txnID != "" {
			return nil, errors.New("--topic, --sasl and --transactional-id are for --kafka")
		}
		if f.replicas < 1 {
			return nil, fmt.Errorf("--replicas %d: want 1 or more", f.replicas)
		}
		opts, err := f.natsOptions(f.natsURLs)
		if err != nil {
			return nil, err
		}
		js := mirror.JetStream{URLs: f.natsURLs, Stream: f.stream, Subject: f.subject, Options: opts}
		m, err := mirror.NewJetStream(cfg, js)
		if err != nil {
			return nil, err
		}
		if ok, err := f.ensureStream(ctx, js, report); !ok {
			return nil, err
		}
		return m, nil
	default:
		if f.topic == "" {
			return nil, errors.New("--kafka needs --topic")
		}
		if f.stream != "" || f.subject != "" || f.creds != "" {
			return nil, errors.New("--stream, --subject and --creds are for --nats")
		}
		opts, err := f.kafkaOptions()
		if err != nil {
			return nil, err
		}
		return mirror.NewKafka(cfg, mirror.Kafka{Seeds: strings.Split(f.kafkaSeeds, ","), Topic: f.topic,
			Partition: int32(f.partition), TransactionalID: f.txnID, Options: opts})
	}
}

// ensureStream creates the stream if it does not exist. While the server
// is unreachable it retries, reporting why, until ctx ends (false, nil).
// An answer that refuses the stream (a subject another stream takes, a
// replica count the cluster cannot hold) is an error.
func (f *mirrorFlags) ensureStream(ctx context.Context, t mirror.JetStream, report func(string)) (bool, error) {
	pause := f.retryMin
	for {
		err := f.tryEnsureStream(ctx, t)
		var apiErr *jetstream.APIError
		if err == nil || errors.As(err, &apiErr) {
			return err == nil, err
		}
		if w := f.nats.waiting(); w != "" {
			report(w)
		} else {
			report("waiting for NATS at " + t.URLs + ": " + err.Error())
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(pause):
		}
		pause = min(2*pause, f.retryMax)
	}
}

func (f *mirrorFlags) tryEnsureStream(ctx context.Context, t mirror.JetStream) error {
	nc, err := nats.Connect(t.URLs, append([]nats.Option{nats.Timeout(f.timeout)}, t.Options...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	_, err = js.Stream(ctx, t.Stream)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: t.Stream, Subjects: []string{t.Subject}, Replicas: f.replicas, Storage: jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil // another process created it meanwhile
	}
	return err
}
