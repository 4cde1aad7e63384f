// Package ingest copies a NATS JetStream stream, or one partition of a
// Kafka topic, into a local offmap queue, so that the processes of a host
// read another host's data with a queue tailer: at memory speed, woken
// across processes when a message arrives, and still reading while the
// engine is away.
//
//	in, err := ingest.New(ingest.Config{
//		Dir:       "/dev/shm/orders",
//		JetStream: &ingest.JetStream{URLs: "nats://a:4222,nats://b:4222", Stream: "ORDERS"},
//	})
//	...
//	defer in.Close()
//	err = in.Run(ctx) // until ctx is done
//
// # The queue is the record of progress
//
// Each message is appended with a 16-byte frame before the engine's
// payload (see FrameSize): the engine's sequence or offset, and a tag of
// the source. There is no offset file and no durable consumer: on start,
// and after every failed attempt, ingest reads the queue's last message
// and asks the engine for what follows it. So what the queue holds and
// where ingest resumes cannot disagree, whatever instant a process is
// killed at:
//
//   - killed before a message's slot is claimed: the message is not in
//     the queue and is fetched again;
//   - killed between the claim (queue.Queue.Reserve) and the commit: the
//     slot stays "not complete", with the dead process's writer lease.
//     Readers never show it; they skip it once they see its writer is
//     dead (queue.Options.SkipAfter), and the next ingest passes over it
//     when it looks for the last message (queue.Tailer.Prev), then
//     appends the message again after it. The queue index of a skipped
//     slot is lost; the engine sequence is not;
//   - killed after the commit: the message is in the queue, and the next
//     ingest resumes after it.
//
// Hence no gaps and no duplicates in engine sequences, read by any tailer,
// across any number of crashes. Two ingests never append to one queue at
// once: New takes an flock on the file .ingest.lock in the queue's
// directory (the kernel drops it when the holder dies) and fails with
// ErrLocked otherwise. Ingest must be the queue's only appender: a
// message without the frame as the last one is an error (ErrNoFrame),
// as is a last message from another source (ErrSourceMismatch).
//
// The queue's pages survive any process crash; against a power loss, the
// queue keeps what the kernel wrote back, and ingest resumes after that
// (the engine still holds the rest). Queue retention must keep two cycles
// at least (queue.Options.KeepCycles), so that right after a roll the
// last stored message is still there to be read: New refuses a queue
// opened with KeepCycles 1. (Ingest is the only appender, so its process
// is the one that rolls and deletes; do not delete cycles by hand down to
// the newest.)
//
// # Engines
//
// JetStream: an ordered consumer (ephemeral, no acknowledgements, in
// stream order) starting at the sequence after the last stored
// (DeliverByStartSequence). The client library recreates it after a
// hole, a missed heartbeat or a reconnection, from the last message it
// delivered, which is the last one stored. A subject filter
// (JetStream.Subject) ingests only matching messages.
//
// Kafka: one partition, read directly with franz-go from the offset
// after the last stored (no consumer group: nothing to rebalance and no
// committed offset to disagree with the queue). A topic of N partitions
// takes N ingests into N queues, since Kafka orders only within a
// partition.
//
// # When the engine is away
//
// Run keeps trying with back-off (Config.RetryMin to RetryMax) while the
// engine is unreachable, restarting or failing; each attempt starts again
// from the queue's last message. Local tailers read what is stored
// meanwhile: the queue needs no engine. Progress reports the last stored
// sequence, the engine's last (polled each second) and the lag between
// them, and the last error.
//
// Each attempt first checks the engine's bounds: if the engine no longer
// holds the messages after the last stored one (its retention removed
// them), Run fails with ErrGap, or with Config.AllowGaps logs the gap and
// goes on; if the engine's last sequence is below the last stored (the
// stream or topic was recreated), Run fails with ErrSourceReset rather
// than wait silently. A jump in sequences while consuming is checked the
// same way: a deleted message is no gap, one that retention removed
// before delivery is (Kafka reports that itself: OffsetOutOfRange). With
// a subject filter, JetStream sequences jump over other subjects, so a
// gap cannot be told from them and is not checked.
//
// # Reading
//
// Tailers of the queue read messages as usual and call Split to separate
// the frame from the engine's payload:
//
//	t, _ := q.Tailer()
//	for t.Wait(ctx, queue.Block) == nil {
//		for _, msg := range t.All() {
//			f, payload, err := ingest.Split(msg)
//			...
//		}
//	}
//
// Only the payload is carried: JetStream subjects and headers, Kafka
// keys, headers and timestamps are not stored.
package ingest
