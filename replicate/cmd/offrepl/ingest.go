package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/offmap/offmap/internal/promtext"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/ingest"
)

// The names in this file start with "ingest": the other commands' files
// share the package.

func init() { commands = append(commands, ingestCommand) }

var ingestCommand = &command{
	name:    "ingest",
	summary: "copy a JetStream stream or a Kafka partition into a local queue",
	help: `Copies a JetStream stream (--nats, --stream) or one partition of a Kafka
topic (--kafka, --topic, --partition) into the local queue --queue, so that
this host's processes read it with queue tailers. Each message is stored
with the engine's sequence (or offset) in a 16-byte frame before the
payload; on start, ingest reads the queue's last message and resumes right
after it: no gap and no duplicate, even after a kill at any instant. There
is no offset file and no consumer group. While the engine is unreachable
ingest retries with back-off, and the queue's readers go on reading.

A topic of N partitions takes N ingests into N queues. Only one ingest may
write to a queue (a lock file, .ingest.lock, enforces it), and nothing
else may append to it. The progress line shows the last sequence stored,
the engine's last sequence and the lag between them.

See also 'offrepl mirror' (a local queue to an engine, the other way) and
'offrepl replica' (a local map kept equal to a bucket or compacted topic).`,
	examples: `  # a JetStream stream into a queue on tmpfs
  offrepl ingest --queue /dev/shm/orders --nats nats://a:4222,nats://b:4222 --stream ORDERS
  # only some subjects of the stream, with credentials and TLS
  offrepl ingest --queue /dev/shm/eu --nats tls://a:4222 --stream ORDERS --subject 'orders.eu.>' --creds app.creds --tls-ca ca.pem
  # partition 3 of a Kafka topic, SASL/SCRAM over TLS, progress each second
  offrepl ingest --queue /data/q/clicks-3 --kafka k1:9093,k2:9093 --topic clicks --partition 3 --sasl scram-sha-512 --user app --password-file pw --tls --progress 1s
`,
	setup: ingestSetup,
}

type ingestFlags struct {
	dir, roll                 string
	natsURLs, stream, subject string
	kafkaSeeds, topic         string
	partition                 int
	authFlags
	allowGaps          bool
	retryMin, retryMax time.Duration
}

func ingestSetup(fs *flag.FlagSet) func(ctx context.Context, tick <-chan time.Time, rep *reporter) error {
	f := &ingestFlags{}
	fs.StringVar(&f.dir, "queue", "", "the local queue's `DIR` (created if missing)")
	fs.StringVar(&f.roll, "roll", "", "roll `CYCLE` of a new queue: daily, hourly, minutely or secondly (default: the queue's own, or daily)")
	fs.StringVar(&f.natsURLs, "nats", "", "JetStream server `URLS`, comma-separated")
	fs.StringVar(&f.stream, "stream", "", "the JetStream stream's `NAME`")
	fs.StringVar(&f.subject, "subject", "", "ingest only the stream's messages on subjects matching `FILTER`")
	fs.StringVar(&f.kafkaSeeds, "kafka", "", "Kafka seed brokers `HOSTS` (host:port, comma-separated)")
	fs.StringVar(&f.topic, "topic", "", "the Kafka `TOPIC`")
	fs.IntVar(&f.partition, "partition", 0, "the topic's partition `N`")
	f.authFlags.define(fs)
	fs.BoolVar(&f.allowGaps, "allow-gaps", false, "when the engine no longer holds messages the queue lacks, log the gap and go on (default: stop with an error)")
	fs.DurationVar(&f.retryMin, "retry-min", 100*time.Millisecond, "first back-off `INTERVAL` after a failure")
	fs.DurationVar(&f.retryMax, "retry-max", 5*time.Second, "longest back-off `INTERVAL`")
	return func(ctx context.Context, tick <-chan time.Time, rep *reporter) error {
		cfg, err := f.config()
		if err != nil {
			return err
		}
		in, err := ingest.New(cfg)
		if err != nil {
			return err
		}
		report := rep.Line
		rep.Expose(func() []promtext.Sample { return ingestSamples(f.dir, in.Progress()) })
		report("started: " + f.nats.withWaiting(in.Progress().String()))
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		ran := make(chan error, 1)
		go func() { ran <- in.Run(runCtx) }()
		for {
			select {
			case <-tick:
				report(f.nats.withWaiting(in.Progress().String()))
			case err := <-ran:
				if cerr := in.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					report("stopped: " + in.Progress().String())
				}
				return err
			}
		}
	}
}

// config turns the flags into an ingest.Config.
func (f *ingestFlags) config() (ingest.Config, error) {
	cfg := ingest.Config{Dir: f.dir, AllowGaps: f.allowGaps, RetryMin: f.retryMin, RetryMax: f.retryMax,
		Logf: func(format string, args ...any) {
			fmt.Fprintln(os.Stderr, time.Now().Format(time.TimeOnly)+" ingest: "+message(f.nats.withWaiting(fmt.Sprintf(format, args...))))
		}}
	if f.dir == "" {
		return cfg, errors.New("--queue is required")
	}
	switch f.roll {
	case "":
	case "daily":
		cfg.QueueOptions.Roll = queue.Daily
	case "hourly":
		cfg.QueueOptions.Roll = queue.Hourly
	case "minutely":
		cfg.QueueOptions.Roll = queue.Minutely
	case "secondly":
		cfg.QueueOptions.Roll = queue.Secondly
	default:
		return cfg, fmt.Errorf("--roll %q: want daily, hourly, minutely or secondly", f.roll)
	}
	switch {
	case (f.natsURLs == "") == (f.kafkaSeeds == ""):
		return cfg, errors.New("give one of --nats (with --stream) and --kafka (with --topic)")
	case f.natsURLs != "":
		if f.stream == "" {
			return cfg, errors.New("--nats needs --stream")
		}
		if f.topic != "" || f.sasl != "" {
			return cfg, errors.New("--topic and --sasl are for --kafka")
		}
		opts, err := f.natsOptions(f.natsURLs)
		if err != nil {
			return cfg, err
		}
		cfg.JetStream = &ingest.JetStream{URLs: f.natsURLs, Stream: f.stream, Subject: f.subject, Options: opts}
	default:
		if f.topic == "" {
			return cfg, errors.New("--kafka needs --topic")
		}
		if f.stream != "" || f.subject != "" || f.creds != "" {
			return cfg, errors.New("--stream, --subject and --creds are for --nats")
		}
		opts, err := f.kafkaOptions()
		if err != nil {
			return cfg, err
		}
		cfg.Kafka = &ingest.Kafka{Seeds: strings.Split(f.kafkaSeeds, ","), Topic: f.topic, Partition: int32(f.partition), Options: opts}
	}
	return cfg, nil
}
