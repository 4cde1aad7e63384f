package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/offmap/offmap/replicate/internal/kafkaoffset"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaSource reads one partition directly (no consumer group: nothing
// to rebalance, and no committed offset that could disagree with the
// queue) from a given offset. Each session has a client of its own,
// started at the offset after the queue's last message; a long-lived
// client answers the polls of the partition's bounds.
type kafkaSource struct {
	cfg  Kafka
	opts []kgo.Opt

	mu    sync.Mutex
	admin *kgo.Client
}

func newKafka(k *Kafka) *kafkaSource {
	opts := append([]kgo.Opt{kgo.SeedBrokers(k.Seeds...), kgo.ClientID("offmap-ingest")}, k.Options...)
	return &kafkaSource{cfg: *k, opts: opts}
}

func (k *kafkaSource) none() int64 { return -1 }

// exact: offsets are contiguous but for compaction and transaction
// markers; a jump at the start of a session is checked against the log
// start offset.
func (k *kafkaSource) exact() bool { return true }

// jumpsMidSession: no; a fetch whose offset retention removed fails with
// OffsetOutOfRange (NoResetOffset), and the next session checks. Jumps
// within a session are compaction's and transactions', not checked.
func (k *kafkaSource) jumpsMidSession() bool { return false }

func (k *kafkaSource) client() (*kgo.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.admin == nil {
		cl, err := kgo.NewClient(k.opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: kafka options: %v", ErrConfig, err)
		}
		k.admin = cl
	}
	return k.admin, nil
}

// bounds lists the partition's log start offset and high watermark.
func (k *kafkaSource) bounds(ctx context.Context) (first, last int64, err error) {
	cl, err := k.client()
	if err != nil {
		return 0, 0, err
	}
	if first, err = k.listOffset(ctx, cl, kafkaoffset.Earliest); err != nil {
		return 0, 0, err
	}
	end, err := k.listOffset(ctx, cl, kafkaoffset.Latest)
	if err != nil {
		return 0, 0, err
	}
	return first, end - 1, nil
}

// listOffset asks for the earliest or latest offset (kafkaoffset).
func (k *kafkaSource) listOffset(ctx context.Context, cl *kgo.Client, ts int64) (int64, error) {
	off, err := kafkaoffset.List(ctx, cl, k.cfg.Topic, k.cfg.Partition, ts)
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	return off, nil
}

func (k *kafkaSource) consume(ctx context.Context, from int64, ss *session) error {
	opts := append(k.opts[:len(k.opts):len(k.opts)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			k.cfg.Topic: {k.cfg.Partition: kgo.NewOffset().At(from)},
		}),
		// An offset out of range (retention passed it) is an error to
		// see, not a silent jump to the start or the end.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("%w: kafka options: %v", ErrConfig, err)
	}
	defer cl.Close()
	ss.live()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fs.IsClientClosed() {
			return errors.New("ingest: kafka client closed")
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("ingest: fetching %s/%d: %w", t, p, err)
			}
		})
		var perr error
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Topic != k.cfg.Topic || p.Partition != k.cfg.Partition || perr != nil {
				return
			}
			for _, r := range p.Records {
				if perr = ss.put(uint64(r.Offset), r.Value); perr != nil {
					return
				}
			}
			if p.HighWatermark > 0 {
				ss.in.noteLast(p.HighWatermark - 1)
			}
		})
		if perr != nil {
			return perr
		}
		if ferr != nil {
			return ferr
		}
	}
}

func (k *kafkaSource) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.admin != nil {
		k.admin.Close()
		k.admin = nil
	}
}
