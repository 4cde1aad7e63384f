package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/values"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OpenKafka opens the map file at path (creating it from opts, and its
// directory, if it does not exist) as a replica of the compacted Kafka
// topic, reached with clients made from kopts: kgo.SeedBrokers and the
// options for SASL and TLS (connection options only: the replica sets how
// it consumes). Open itself needs no broker.
//
// A key in the map is a record's key; a value the record's value. A
// tombstone (a record with a null value) deletes its key; records with a
// null key, which a compacted topic refuses, are skipped. Revisions are
// offsets, one sequence per partition: Kafka keeps no revision per key,
// so there is no compare-and-set (Update, Entry and CompareAndSwap return
// ErrUnsupported).
func OpenKafka(path string, opts offmap.Options, topic string, cfg Config, kopts ...kgo.Opt) (*Replica, error) {
	if topic == "" {
		return nil, errors.New("replica: OpenKafka needs a topic")
	}
	// A topic created while the replica waits for it is seen within a
	// second, not the five seconds kgo waits by default before it asks
	// again for metadata it found wanting (kopts may say otherwise).
	kopts = append([]kgo.Opt{kgo.MetadataMinAge(250 * time.Millisecond)}, kopts...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("replica: kafka client: %w", err)
	}
	e := &kafkaEngine{topic: topic, kopts: kopts, cl: cl, adm: kadm.NewClient(cl)}
	return open(path, opts, e, cfg)
}

// defaultDeleteRetention is Kafka's delete.retention.ms when the topic
// does not say.
const defaultDeleteRetention = 24 * time.Hour

type kafkaEngine struct {
	topic string
	kopts []kgo.Opt
	cl    *kgo.Client // produces and asks the brokers about the topic
	adm   *kadm.Client

	// For the Run goroutine only:
	pos        []values.Uint64 // the next offset to apply, per partition, in the map
	head       []int64         // the last stable offset per partition, as last learned
	applied    uint64          // the sum of pos
	headSum    uint64          // the sum of head
	retention  time.Duration   // the topic's delete.retention.ms
	savedUntil time.Time       // the CaughtUp last stored in the map
}

func (e *kafkaEngine) name() string   { return engineKafka }
func (e *kafkaEngine) source() string { return e.topic }
func (e *kafkaEngine) close()         { e.cl.Close() }

func (e *kafkaEngine) attach(r *Replica) error {
	return e.partitions(r, r.st.Partitions)
}

// partitions takes positions for partitions up to n, recording how many
// the state names.
func (e *kafkaEngine) partitions(r *Replica, n int) error {
	for p := len(e.pos); p < n; p++ {
		h, err := r.position(partitionKey(int32(p)))
		if err != nil {
			return err
		}
		e.pos = append(e.pos, h)
		e.head = append(e.head, 0)
		e.applied += h.Load()
	}
	if n > r.st.Partitions {
		r.st.Partitions = n
		if err := r.saveState(); err != nil {
			return err
		}
	}
	r.notePosition(e.applied)
	return nil
}

// setPos records that partition p is applied up to next.
func (e *kafkaEngine) setPos(p int, next int64) {
	old := e.pos[p].Load()
	e.pos[p].Store(uint64(next))
	e.applied = e.applied - old + uint64(next)
}

func (e *kafkaEngine) setHead(p int, lso int64) {
	if lso < 0 {
		return
	}
	e.headSum = e.headSum - uint64(e.head[p]) + uint64(lso)
	e.head[p] = lso
}

// caughtUp reports whether every partition is applied up to its head.
func (e *kafkaEngine) caughtUp(heads []int64) bool {
	for p, h := range heads {
		if int64(e.pos[p].Load()) < h {
			return false
		}
	}
	return true
}

// offsets lists one kind of offset for every partition of the topic.
func (e *kafkaEngine) offsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error)) ([]int64, error) {
	lo, err := list(ctx, e.topic)
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("replica: topic %s: listing offsets: %w", e.topic, err)
	}
	ps := lo[e.topic]
	out := make([]int64, len(ps))
	for p := range out {
		o, ok := ps[int32(p)]
		if !ok {
			return nil, fmt.Errorf("replica: topic %s: no offset for partition %d", e.topic, p)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// metadata asks the brokers for the topic's partition count and ID
// (empty if the brokers have no topic IDs). It bypasses the client's
// metadata cache, which would hide partitions added a moment ago, and
// refreshes it for the requests that follow.
func (e *kafkaEngine) metadata(ctx context.Context) (partitions int, id string, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(e.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		return 0, "", fmt.Errorf("replica: topic %s: %w", e.topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != e.topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, "", fmt.Errorf("replica: topic %s: %w", e.topic, err)
		}
		if t.TopicID != ([16]byte{}) {
			id = kadm.TopicID(t.TopicID).String()
		}
		return len(t.Partitions), id, nil
	}
	return 0, "", fmt.Errorf("replica: topic %s: %w", e.topic, kerr.UnknownTopicOrPartition)
}

// deleteRetention reads the topic's delete.retention.ms, and warns once if
// the topic is not compacted.
func (e *kafkaEngine) deleteRetention(ctx context.Context, r *Replica) time.Duration {
	d := defaultDeleteRetention
	rcs, err := e.adm.DescribeTopicConfigs(ctx, e.topic)
	if err != nil || len(rcs) == 0 || rcs[0].Err != nil {
		return d
	}
	for _, c := range rcs[0].Configs {
		if c.Value == nil {
			continue
		}
		switch c.Key {
		case "delete.retention.ms":
			if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil && ms >= 0 {
				d = time.Duration(ms) * time.Millisecond
			}
		case "cleanup.policy":
			if !strings.Contains(*c.Value, "compact") && e.retention == 0 {
				r.logf("replica: kafka %s: cleanup.policy is %q, not compact: every record is kept, and a resync reads them all", e.topic, *c.Value)
			}
		}
	}
	return d
}

// kResync is a full resync under way: every record from the start of
// each partition up to its last stable offset when the resync began.
type kResync struct {
	seen   map[string]struct{}
	target []int64
	at     time.Time // when target was taken
}

func (e *kafkaEngine) session(ctx context.Context, r *Replica) error {
	rctx, cancel := r.reqCtx(ctx)
	defer cancel()
	n, inc, err := e.metadata(rctx)
	if err != nil {
		return err
	}
	e.retention = e.deleteRetention(rctx, r)
	starts, err := e.offsets(rctx, e.adm.ListStartOffsets)
	if err != nil {
		return err
	}
	ends, err := e.offsets(rctx, e.adm.ListEndOffsets)
	if err != nil {
		return err
	}
	at := time.Now()
	heads, err := e.offsets(rctx, e.adm.ListCommittedOffsets)
	if err != nil {
		return err
	}
	if len(starts) != n || len(ends) != n || len(heads) != n {
		return fmt.Errorf("replica: topic %s: the partitions changed while listing them", e.topic)
	}
	r.noteConnected()

	why := ""
	switch {
	case r.st.Resyncing:
		why = "a resync is due"
	case r.st.Incarnation != inc:
		why = "the topic is not the one the map replicated (created again)"
	case n < r.st.Partitions:
		why = fmt.Sprintf("the topic has %d partitions, fewer than the map's %d: it was created again", n, r.st.Partitions)
	}
	for p := 0; why == "" && p < r.st.Partitions; p++ {
		next := int64(e.pos[p].Load())
		switch {
		case next < starts[p]:
			why = fmt.Sprintf("partition %d starts at offset %d, past the map's %d: records were removed before they were applied", p, starts[p], next)
		case next > ends[p]:
			why = fmt.Sprintf("partition %d ends at offset %d, before the map's %d: it was truncated or created again", p, ends[p], next)
		}
	}
	if err := e.partitions(r, n); err != nil {
		return err
	}
	if why == "" && !e.caughtUp(heads) && e.tombstonesMayBeGone(r) {
		why = fmt.Sprintf("the map last caught up at %s, longer ago than the topic keeps tombstones (delete.retention.ms %v)", r.st.CaughtUp.Format(time.RFC3339), e.retention)
	}
	var rs *kResync
	if why != "" {
		r.logf("replica: %s %s: %s", e.name(), e.topic, why)
		if err := r.beginResync(inc); err != nil {
			return err
		}
		for p := range len(e.pos) {
			if p < n {
				e.setPos(p, starts[p])
			} else {
				e.setPos(p, 0) // a partition of the topic's former incarnation
			}
		}
		r.notePosition(e.applied)
		rs = &kResync{seen: map[string]struct{}{}, target: heads, at: at}
	}
	for p, h := range heads {
		e.setHead(p, h)
	}

	offsets := make(map[int32]kgo.Offset, n)
	for p := range n {
		offsets[int32(p)] = kgo.NewOffset().At(int64(e.pos[p].Load()))
	}
	cons, err := kgo.NewClient(append(slices.Clip(e.kopts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // so that the position passes transaction markers
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)...)
	if err != nil {
		return fmt.Errorf("replica: topic %s: consumer: %w", e.topic, err)
	}
	defer cons.Close()
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	fetches := make(chan kgo.Fetches, 2)
	go func() {
		for {
			fs := cons.PollRecords(fctx, 4096)
			if fctx.Err() != nil {
				return
			}
			select {
			case fetches <- fs:
			case <-fctx.Done():
				return
			}
		}
	}()

	if rs != nil && e.caughtUp(rs.target) {
		if err := e.finishResync(r, rs); err != nil {
			return err
		}
		rs = nil
	}
	tick := time.NewTicker(r.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case fs := <-fetches:
			if err := e.applyFetches(r, fs, rs); err != nil {
				return err
			}
			if rs != nil && e.caughtUp(rs.target) {
				if err := e.finishResync(r, rs); err != nil {
					return err
				}
				rs = nil
			}
		case <-tick.C:
			if err := e.poll(ctx, r, cons, rs); err != nil {
				return err
			}
		case <-r.pollRequested():
			if err := e.poll(ctx, r, cons, rs); err != nil {
				return err
			}
		}
	}
}

// tombstonesMayBeGone reports whether the replica last caught up so long
// ago that compaction may have removed tombstones it has not applied: a
// tombstone written after the replica last caught up is kept for at least
// delete.retention.ms after it was written (less a tenth for clocks that
// disagree).
func (e *kafkaEngine) tombstonesMayBeGone(r *Replica) bool {
	return !r.st.CaughtUp.IsZero() && time.Since(r.st.CaughtUp) >= e.retention-e.retention/10
}

func (e *kafkaEngine) applyFetches(r *Replica, fs kgo.Fetches, rs *kResync) error {
	for _, f := range fs {
		for _, ft := range f.Topics {
			if err := e.applyTopic(r, ft, rs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *kafkaEngine) applyTopic(r *Replica, ft kgo.FetchTopic, rs *kResync) error {
	for _, fp := range ft.Partitions {
		p := int(fp.Partition)
		if fp.Err != nil {
			if errors.Is(fp.Err, kerr.OffsetOutOfRange) && rs == nil {
				return r.requestResync(fmt.Sprintf("partition %d: records the replica had not applied are gone", p))
			}
			if errors.Is(fp.Err, context.Canceled) {
				continue
			}
			return fmt.Errorf("replica: topic %s partition %d: %w", ft.Topic, p, fp.Err)
		}
		if ft.Topic != e.topic || p < 0 || p >= len(e.pos) {
			continue
		}
		e.setHead(p, fp.LastStableOffset)
		for _, rec := range fp.Records {
			if err := e.apply(r, p, rec, rs); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply applies one record, then records the partition's next offset: a
// replica killed between the two applies it again, which leaves the same
// map.
func (e *kafkaEngine) apply(r *Replica, p int, rec *kgo.Record, rs *kResync) error {
	if rec.Offset < int64(e.pos[p].Load()) {
		return nil // applied already
	}
	if !rec.Attrs.IsControl() && rec.Key != nil && !IsStateKey(rec.Key) {
		var err error
		if rec.Value == nil {
			err = r.applyDelete(rec.Key)
		} else {
			err = r.applyPut(rec.Key, rec.Value, time.Time{})
		}
		if err != nil {
			return err
		}
		if rs != nil {
			rs.seen[string(rec.Key)] = struct{}{}
		}
	}
	e.setPos(p, rec.Offset+1)
	r.noteApplied(e.applied, e.headSum)
	return nil
}

func (e *kafkaEngine) finishResync(r *Replica, rs *kResync) error {
	if err := r.finishResync(rs.seen, rs.at); err != nil {
		return err
	}
	e.savedUntil = rs.at
	r.noteHead(e.headSum, rs.at, true)
	return nil
}

// poll asks the brokers for the partitions' last stable offsets: the head
// for Progress, whether the replica is caught up (for Sync and for the
// time it keeps in its state), and new partitions.
func (e *kafkaEngine) poll(ctx context.Context, r *Replica, cons *kgo.Client, rs *kResync) error {
	rctx, cancel := r.reqCtx(ctx)
	defer cancel()
	at := time.Now()
	n, inc, err := e.metadata(rctx)
	var heads []int64
	if err == nil {
		heads, err = e.offsets(rctx, e.adm.ListCommittedOffsets)
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
			return err // deleted: the next session waits for it
		}
		r.noteErr(err)
		return nil // the consumer resumes on its own when the brokers are back
	}
	if inc != r.st.Incarnation {
		return r.requestResync("the topic was created again")
	}
	if n > len(e.pos) {
		from := len(e.pos)
		if err := e.partitions(r, n); err != nil {
			return err
		}
		added := map[int32]kgo.Offset{}
		for p := from; p < n; p++ {
			added[int32(p)] = kgo.NewOffset().At(0)
		}
		cons.AddConsumePartitions(map[string]map[int32]kgo.Offset{e.topic: added})
		r.logf("replica: kafka %s: consuming %d new partitions", e.topic, n-from)
	}
	heads = heads[:min(len(heads), len(e.pos))]
	for p, h := range heads {
		e.setHead(p, h)
	}
	// Partitions the metadata names but the offsets do not are not caught up.
	caught := len(heads) >= n && e.caughtUp(heads)
	if rs != nil {
		r.noteHead(e.headSum, at, false)
		return nil
	}
	if caught {
		if at.Sub(e.savedUntil) >= time.Second || r.st.CaughtUp.IsZero() {
			r.st.CaughtUp = at
			if err := r.saveState(); err != nil {
				return err
			}
			e.savedUntil = at
		}
	} else {
		if e.tombstonesMayBeGone(r) {
			return r.requestResync(fmt.Sprintf("the replica has lagged since %s, longer than the topic keeps tombstones", r.st.CaughtUp.Format(time.RFC3339)))
		}
		starts, err := e.offsets(rctx, e.adm.ListStartOffsets)
		if err == nil {
			for p := range min(len(starts), len(e.pos)) {
				if int64(e.pos[p].Load()) < starts[p] {
					return r.requestResync(fmt.Sprintf("partition %d starts at offset %d, past the replica's %d", p, starts[p], e.pos[p].Load()))
				}
			}
		}
	}
	r.noteHead(e.headSum, at, caught)
	return nil
}

// The writes, as records.

func (e *kafkaEngine) produce(ctx context.Context, key, value []byte) error {
	if key == nil {
		key = []byte{} // a null key is refused by compacted topics
	}
	rec := &kgo.Record{Topic: e.topic, Key: key, Value: value}
	if err := e.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		op := "put"
		if value == nil {
			op = "delete"
		}
		return fmt.Errorf("replica: %s %q in topic %s: %w", op, key, e.topic, err)
	}
	return nil
}

func (e *kafkaEngine) put(ctx context.Context, key, value []byte) error {
	return e.produce(ctx, key, value)
}

func (e *kafkaEngine) del(ctx context.Context, key []byte) error {
	return e.produce(ctx, key, nil)
}

func (e *kafkaEngine) entry(context.Context, []byte) ([]byte, uint64, error) {
	return nil, 0, fmt.Errorf("%w: Kafka keeps no revision per key", ErrUnsupported)
}

func (e *kafkaEngine) update(context.Context, []byte, []byte, uint64) (uint64, error) {
	return 0, fmt.Errorf("%w: Kafka keeps no revision per key, so it has no compare-and-set", ErrUnsupported)
}
