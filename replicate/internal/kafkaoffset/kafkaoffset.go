// Package kafkaoffset asks a Kafka broker for a partition's first or next
// offset, for the mirror and the ingest alike.
package kafkaoffset

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The timestamps ListOffsets takes for the two ends of a partition.
const (
	Earliest = -2 // the first offset the partition still holds
	Latest   = -1 // the high watermark: the next offset (read_uncommitted)
)

// List returns the offset at ts (Earliest or Latest) of partition of
// topic.
func List(ctx context.Context, cl *kgo.Client, topic string, partition int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("listing offsets of %s/%d: %w", topic, partition, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("listing offsets of %s/%d: %w", topic, partition, err)
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("listing offsets of %s/%d: no answer for the partition", topic, partition)
}
