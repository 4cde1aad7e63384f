// Package replica keeps a local offmap map equal to a JetStream key-value
// bucket or a compacted Kafka topic, so that every host reads the shared
// data at memory speed while the engine carries the changes between
// hosts and decides their order.
//
// On each host one replica process (offrepl replica, or a program calling
// Run) applies the engine's changes to a map file; any number of
// processes on the host open the same file with offmap.Open and read it
// with Get, as they would any map. Writes go through the engine: Put,
// Delete and Update here, or any client of the engine. A write reaches
// the local map when the change comes back through the engine's stream,
// as it reaches every other replica.
//
//	r, err := replica.OpenJetStream("/dev/shm/prices.map", offmap.Options{Entries: 1e6, AverageKeySize: 16, AverageValueSize: 64}, js, "prices", replica.Config{})
//	go r.Run(ctx)                    // applies the bucket's changes until ctx ends
//	err = r.Put(ctx, key, value)     // through the engine
//	err = r.Sync(ctx)                // until this replica has applied it
//	v, err := r.Get(key)             // a local read: offmap's Get
//
// # What the map holds
//
// A key of the map is the bucket's key (its bytes) or the record's key; a
// value is the value, byte for byte, so readers need nothing but offmap.
// A key deleted or purged in the bucket, or whose Kafka record is a
// tombstone (null value), is absent. Empty values are kept (a Kafka record
// with an empty, not null, value is a put). Kafka records with a null key,
// which compacted topics refuse, are skipped.
//
// The replica keeps its own state in the map too, under keys that begin
// with StatePrefix, a zero byte (which no JetStream key can hold):
// the source and its incarnation, and the last revision applied (see
// State and ReadState). Replica.All, Len and Get hide them; a process
// iterating the file with offmap skips the keys for which IsStateKey is
// true. One replica at a time may apply to a map: Open locks a file
// beside it (MAP.replica-lock) and a second gets ErrBusy. Nothing else may
// write to the map.
//
// # Order and convergence
//
// The engine's order decides: every replica applies the same changes in
// the same order (a JetStream stream's sequence; a Kafka partition's
// offsets, and a key's records all go to one partition), and each change
// replaces the key's value, so the last writer in the engine's order wins
// and replicas that have applied the same revision hold the same map.
// Two writers that must not overwrite each other use compare-and-set:
// Update(key, value, revision) stores only if the key is still at the
// revision read (Entry returns it; 0 means absent), which JetStream
// checks; CompareAndSwap does the same by value. Kafka keeps no revision
// per key, hence no compare-and-set: Update, Entry and CompareAndSwap
// return ErrUnsupported there, and concurrent writers of a key simply
// race (the one the partition orders last wins).
//
// A replica's reads may lag the engine (Progress tells by how much); a
// process that must read its own write calls Sync after it, which waits
// until the replica has applied everything the engine held when Sync was
// called.
//
// # Crashes and restarts
//
// The replica stores each change in the map and only then the revision
// it covers (one atomic 8-byte store into the mapped file, through a value
// handle): a process killed at any instant leaves the map holding every
// change up to the revision it names, and perhaps the next one too. The
// next Run resumes right after the named revision, so at worst it applies
// that one change again, which leaves the same map: a change sets a key
// to a value or deletes it, whatever the map held. (offmap's UpdateKeys,
// once it is crash-atomic, could store both in one step, so that readers
// using ViewKeys see a key and the revision that covers it together.)
//
// # Catching up, and history that is gone
//
// A new replica, or one whose map has no state, catches up from scratch
// with a full resync. A replica restarted resumes after the revision it
// applied last, if the engine still holds everything after it. When it
// may not, the replica resyncs:
//
//   - JetStream: the bucket's stream was created again (its creation time
//     differs); the map is past the stream's last sequence; the stream's
//     first sequence is past the one to resume from (revisions were
//     removed: purged, expired by MaxAge, dropped by limits); a change
//     arrives after a gap reaching below the stream's first sequence;
//     or, caught up, the map holds more keys than the stream has subjects
//     (the stream was purged without markers).
//   - Kafka: the topic was created again (its ID differs) or has fewer
//     partitions; a partition starts past the offset to resume from
//     (retention or DeleteRecords removed records) or ends before it;
//     fetching says the offset is out of range; or the replica last
//     caught up longer ago than nine tenths of the topic's
//     delete.retention.ms, after which compaction may have removed
//     tombstones it has not applied.
//
// A resync reads the engine's current state (JetStream: the last change
// of every key, DeliverLastPerSubject; Kafka: every partition from its
// start up to its last stable offset), applies it over the map, and then
// deletes every local key it did not see: keys deleted in the engine
// meanwhile, whose deletes may be gone, disappear at that point. Changes
// made during the resync are applied as they come. Readers see the map
// go forward key by key; keys that the engine deleted stay readable until
// the resync ends. The resync is recorded in the state before it starts,
// so a replica killed during one starts it over. It keeps the set of keys
// seen in memory (about the keys' size plus 50 bytes each).
//
// What no replica can see: JetStream's PurgeDeletes, or a purge of some
// subjects, removes delete markers from the middle of the stream; a
// replica that was away and had not applied them keeps those keys. Run
// with Config.Resync (offrepl replica --resync) after such a purge, or
// purge only markers older than any replica's downtime. The same holds
// for a Kafka topic whose tombstones a replica did not apply within
// delete.retention.ms while its position looked valid, which the rule
// above makes unlikely but which clocks far apart could allow.
//
// # Expiry
//
// JetStream expires keys by the bucket's TTL (MaxAge) and, since
// nats-server 2.11, by a key's own TTL (KeyTTL). With the bucket's
// LimitMarkerTTL set, the server places a delete marker when it expires a
// key, and replicas delete the key when the marker comes, as they apply
// KV deletes and purges (KV-Operation DEL and PURGE, Nats-Marker-Reason).
// Without markers, an expired key vanishes from the engine and nothing
// reaches the replicas. A map created with offmap's Options.Expiring (or
// TTL) keeps each entry's expiry time as the engine computes it (the
// message's time plus its Nats-TTL or the bucket's MaxAge), so the key
// stops being read at that time, even with the replica stopped and with
// no marker. A map without keeps the key until a resync removes it:
// one happens when a caught-up replica finds more keys in its map than
// the stream has subjects (at most once a minute), or when a restarted
// replica finds the revisions after its own expired (MaxAge removes the
// oldest first). So for a bucket with a TTL, create the map Expiring or
// the bucket with LimitMarkerTTL. Kafka expires nothing by key: only tombstones delete;
// records that retention removes (cleanup.policy compact,delete) stay in
// the replicas that applied them.
//
// # The engine unreachable
//
// Open needs no engine. When the engine cannot be reached, Run keeps
// trying with back-off (Config.MinBackoff to MaxBackoff) while the map
// keeps serving reads; Progress shows Connected false, the error and the
// lag as last known. Writes fail with the engine client's error (give
// them a context with a deadline). Authentication and TLS are the
// engine client's: the nats.Options of the connection behind the
// jetstream.JetStream handle, and the kgo.Opts given to OpenKafka.
//
// # JetStream details
//
// The replica reads the bucket's stream (KV_<bucket>) with an ordered
// consumer, not the KV watcher, to see the headers (TTLs, markers,
// rollups) and to start at a sequence. Such a consumer may live on any
// replica of the stream, one that lags behind the stream leader too, so
// the replica asks the leader, never the consumer, whether it is caught
// up. A message with Nats-Rollup "all" deletes every other key, as it
// does in the stream.
package replica
