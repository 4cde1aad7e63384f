// Package mirror copies every message of a local offmap queue to a NATS
// JetStream stream or to one partition of a Kafka topic, in queue order,
// and keeps doing so across crashes and restarts of the mirror and of the
// engine: no message is lost and none is stored twice at the engine, even
// when the mirror is killed (SIGKILL) at any instant.
//
//	m, err := mirror.NewJetStream(mirror.Config{
//		Dir:        "/dev/shm/orders",
//		TailerName: "mirror",
//		SourceID:   "host-a/orders",
//	}, mirror.JetStream{URLs: "nats://a:4222,nats://b:4222", Stream: "ORDERS_HOST_A", Subject: "orders.host-a"})
//	...
//	err = m.Run(ctx) // until ctx is done; m.Progress() from any goroutine
//
// Every message reaches the engine with its payload unchanged and two
// headers, HeaderSource (Config.SourceID) and HeaderIndex (the queue
// index, in decimal), so that a consumer can tell where it came from and
// drop what it has seen (per source, an index not above the last one
// seen), and an ingest on another host can use them.
//
// # Where the mirror resumes
//
// A named tailer of the queue (Config.TailerName) records what the engine
// has acknowledged: the mirror acknowledges it (queue.Tailer.Ack) only
// after the engine did, in queue order, up to the lowest message not yet
// acknowledged. So it can only lag behind the engine: a mirror killed
// after the engine stored a message and before the tailer recorded it
// would, on its own, send the message again. That is why every session
// with the engine (at start, and after every error) first asks the engine
// for the last message it holds from this source and skips the queue up
// to it. What the engine holds is the truth; the tailer only saves the
// search and tells retention (queue.Options.KeepCycles) which cycles are
// still needed. The resumption depends on no time window (JetStream's
// de-duplication window only covers copies in transit; see below).
//
// # JetStream
//
// Messages are published asynchronously (PublishMsgAsync), at most
// Config.MaxInFlight at a time, each with:
//
//   - Nats-Msg-Id: SourceID + ":" + index, for the stream's
//     de-duplication;
//   - Nats-Expected-Last-Sequence: the stream sequence the message before
//     it gets. The server stores a message only if the stream's last
//     sequence is the one expected. This is what keeps the order:
//     asynchronous publishing alone can leave holes, for instance when the
//     stream leader changes while messages are in flight (the old
//     leader's last proposals are lost, the new leader stores the messages
//     sent after them). With the expectation, every message after a hole
//     expects a sequence past the stream's last, and is refused; the next
//     session resends from the hole.
//
// A session starts from the stream's last sequence and the last message
// of the source, which it reads from the stream's leader (a direct get may
// be answered by a replica that lags). Its first message goes alone: the
// others follow once the stream has stored it where expected (or found it
// a duplicate of a stored one), which proves the starting point. Every
// acknowledgement must then name the sequence the mirror counted, or the
// session ends and the next one reads the stream again. A refusal names
// the stream's actual last sequence, which the next session starts from.
//
// The stream's de-duplication window (StreamConfig.Duplicates, 2 minutes
// by default) serves only for a copy still on its way when the next
// session starts (sent by a mirror just killed, or by a session that
// failed): it is found a duplicate. The window must outlast a restart of
// the mirror, which the default does by far.
//
// The sequence is the whole stream's, so the stream must be written by
// this mirror alone: one stream per source (consumers that want all
// sources read several streams, or a stream that sources them). A session
// that finds another's message last in the stream (or on Subject) returns
// ErrStreamShared, and Run with it; a message someone else stores while a
// session runs makes the session's next messages expect too low a
// sequence, and may let one of them in after a refused one before the
// session ends and the next one stops with ErrStreamShared.
//
// Why not chain the messages by id (Nats-Expected-Last-Msg-Id), which
// would not depend on the stream being exclusive? In nats-server 2.15.3 a
// replicated stream checks that header only when its replicas apply the
// message, and a refusal there stops the replicas with a write error: one
// wrong expectation takes the stream down. Expected sequences are checked
// by the leader before it proposes the message, and a refusal is
// harmless (TestClusterRefusalIsHarmless checks it).
//
// # Kafka
//
// Records are produced with franz-go in transactions of a fixed
// transactional ID (Kafka.TransactionalID), to one partition
// (Kafka.Partition): a transaction is committed when it holds
// Config.MaxInFlight records or 16 MiB, or when the queue has nothing more
// to read, and the tailer is acknowledged after the commit. An idempotent producer alone would not
// do: a killed producer's records may still be on their way (or, in a
// real cluster, written to the leader but not yet to its followers, and
// so not yet visible), and its producer id dies with it, so nothing tells
// the next instance whether they will land. The transactional ID fences
// the previous instance instead: the new session's InitProducerID aborts
// its open transaction and makes the brokers refuse anything it still
// sends. Only then does the mirror read the end of the partition back
// (read_uncommitted, keeping control records, and following each producer's
// commit and abort markers) to find the last committed record of its
// source, and resume after it. The partition may be shared with other
// producers: the read goes back in growing windows until it finds a record
// of this source or the partition's start.
//
// Consumers must read with isolation level read_committed
// (kgo.FetchIsolationLevel(kgo.ReadCommitted())) to see each record once:
// records of an aborted transaction stay in the log, and a read_uncommitted
// consumer sees them, followed by their resent copies (the index header
// lets it drop those). While a killed mirror's transaction is open and no
// new session has aborted it, read_committed consumers of the partition
// wait, up to the transaction timeout (kgo.TransactionTimeout, 40 s by
// default). The topic must not be compacted.
//
// # Guarantees, and what they rest on
//
//   - Order: the engine stores the messages of a source in queue order
//     (JetStream: by the expected sequences; Kafka: one partition, one
//     producer, transactions).
//   - No loss: the tailer is acknowledged only up to what the engine
//     acknowledged; a message is skipped only when the engine holds a
//     later one of the same source, which it stores only after this one.
//   - No duplicate at the engine: resumption after the engine's last
//     message of the source, plus the refusal of late copies (JetStream:
//     the expected sequences, and de-duplication within its window;
//     Kafka: fencing by the transactional ID, and read_committed).
//     JetStream's de-duplication must also hold across a change of
//     stream leader, which is the server's to ensure.
//   - One mirror per tailer name: Run takes an flock on a file
//     ".mirror-<name>.lock" in the queue's directory (the kernel drops it
//     when the process dies) and fails with ErrLocked while another holds
//     it. Two mirrors of one source into one target would keep
//     interrupting each other (the expected sequences, or the fencing).
//   - The queue's own durability: the mirror sends what the queue holds.
//     After a power loss the queue may have lost messages the engine
//     already holds; the mirror then finds the engine ahead of the queue
//     and returns ErrEngineAhead rather than guess.
//
// # When the engine is away
//
// The mirror only reads the queue: appenders never wait for it. When the
// engine is unreachable, slow (no acknowledgement within Config.Timeout)
// or refusing, the session ends, Run waits (Config.RetryMin doubling to
// Config.RetryMax) and starts another, which resumes as above; meanwhile
// the queue keeps growing and Progress reports the lag (messages appended
// and not yet acknowledged) and the error. A message the engine refuses
// (a stream full, a message too large) is retried the same way, until an
// operator makes room for it. Errors that retrying cannot cure (ErrStreamShared, ErrEngineAhead, ErrLocked, a damaged or closed
// queue, an invalid configuration) end Run.
//
// Run returns nil when its context is cancelled, after waiting (up to
// Config.Timeout) for the acknowledgements of what it sent and recording
// them in the tailer: a stopped mirror resumes where it left off.
package mirror
