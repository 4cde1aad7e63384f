package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/values"
)

// OpenJetStream opens the map file at path (creating it from opts, and
// its directory, if it does not exist) as a replica of the JetStream
// key-value bucket named bucket, reached through js (jetstream.New on a connection made with
// the nats.Options for its servers, credentials and TLS). The bucket must
// exist when Run or a write first reaches it; Open itself needs no engine.
//
// A key in the map is the bucket's key, as bytes; a value is the value.
// Deleted and purged keys, and keys the server expires with a marker,
// are absent. Revisions are the bucket's: the stream sequence of each
// change.
func OpenJetStream(path string, opts offmap.Options, js jetstream.JetStream, bucket string, cfg Config) (*Replica, error) {
	if js == nil {
		return nil, errors.New("replica: OpenJetStream needs a JetStream handle")
	}
	if bucket == "" || strings.ContainsAny(bucket, ".*> \t\r\n") {
		return nil, fmt.Errorf("replica: %q is not a bucket name", bucket)
	}
	return open(path, opts, &jsEngine{js: js, bucket: bucket, stream: "KV_" + bucket}, cfg)
}

// The headers JetStream and its KV layer put on changes.
const (
	hdrKVOperation  = "KV-Operation"       // DEL or PURGE: a delete
	hdrMarkerReason = "Nats-Marker-Reason" // a marker the server placed (MaxAge, Purge, Remove): a delete
	hdrRollup       = "Nats-Rollup"        // "all": every other subject is gone
	hdrTTL          = "Nats-TTL"           // the message's own time to live
)

type jsEngine struct {
	js     jetstream.JetStream
	bucket string
	stream string
	seq    values.Uint64 // the last stream sequence applied, in the map

	// The session's view of the stream, for the Run goroutine only.
	last     uint64 // the last sequence applied in this session
	firstSeq uint64 // the stream's first sequence at the last poll
	maxAge   time.Duration

	// subjectsResync is when the replica last resynced because it held
	// more keys than the stream has subjects.
	subjectsResync time.Time

	kvMu sync.Mutex
	kv   jetstream.KeyValue
}

func (e *jsEngine) name() string   { return engineJetStream }
func (e *jsEngine) source() string { return e.stream }
func (e *jsEngine) close()         {}

func (e *jsEngine) attach(r *Replica) error {
	h, err := r.position(seqKey)
	if err != nil {
		return err
	}
	e.seq = h
	r.notePosition(h.Load())
	return nil
}

// subjectsResyncEvery bounds how often a replica resyncs because it holds
// more keys than the stream has subjects: in a bucket whose keys expire
// with no marker (MaxAge without LimitMarkerTTL) into a map that does not
// expire them, that happens at every expiry.
const subjectsResyncEvery = time.Minute

// incarnation tells a stream from one created again under its name.
func incarnation(info *jetstream.StreamInfo) string {
	return info.Created.UTC().Format(time.RFC3339Nano)
}

// kvFilter is the subjects of the bucket's keys in its stream.
func kvFilter(cfg jetstream.StreamConfig, bucket string) string {
	switch {
	case len(cfg.Subjects) == 1:
		return cfg.Subjects[0]
	case cfg.Mirror != nil:
		return "$KV." + strings.TrimPrefix(cfg.Mirror.Name, "KV_") + ".>"
	}
	return "$KV." + bucket + ".>"
}

// kvKey is the key in a change's subject, "$KV.<bucket>.<key>".
func kvKey(subject string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(subject, "$KV.")
	if !ok {
		return nil, false
	}
	i := strings.IndexByte(rest, '.')
	if i < 0 || i == len(rest)-1 {
		return nil, false
	}
	return []byte(rest[i+1:]), true
}

// isDelete reports whether a change deletes its key.
func isDelete(h nats.Header) bool {
	if len(h) == 0 {
		return false
	}
	switch h.Get(hdrKVOperation) {
	case "DEL", "PURGE":
		return true
	}
	return h.Get(hdrMarkerReason) != ""
}

// expiry is when the engine expires a put stored at ts: its own TTL, or
// the bucket's (MaxAge); zero for never.
func (e *jsEngine) expiry(h nats.Header, ts time.Time) time.Time {
	if len(h) > 0 {
		if v := h.Get(hdrTTL); v != "" {
			if v == "never" || v == "-1" {
				return time.Time{}
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				n, err2 := strconv.ParseInt(v, 10, 64)
				if err2 == nil && n > 0 {
					d, err = time.Duration(n)*time.Second, nil
				}
			}
			if err == nil && d > 0 {
				return ts.Add(d)
			}
		}
	}
	if e.maxAge > 0 {
		return ts.Add(e.maxAge)
	}
	return time.Time{}
}

// jsResync is a full resync under way: a consumer delivering the last
// change of every key (DeliverLastPerSubject), then the changes after.
type jsResync struct {
	seen   map[string]struct{} // keys the resync delivered
	target uint64              // the stream's last sequence once the consumer existed
}

type jsDelivery struct {
	msg jetstream.Msg
	err error
}

func (e *jsEngine) session(ctx context.Context, r *Replica) error {
	rctx, cancel := r.reqCtx(ctx)
	s, err := e.js.Stream(rctx, e.stream)
	cancel()
	if err != nil {
		return fmt.Errorf("replica: bucket %s: %w", e.bucket, err)
	}
	info := s.CachedInfo()
	r.noteConnected()
	inc := incarnation(info)
	e.maxAge = info.Config.MaxAge
	e.firstSeq = info.State.FirstSeq
	applied := e.seq.Load()

	why := ""
	switch {
	case r.st.Resyncing:
		why = "a resync is due"
	case r.st.Incarnation != inc:
		why = "the bucket's stream is not the one the map replicated (created again)"
	case applied > info.State.LastSeq:
		why = fmt.Sprintf("the map is at revision %d, past the stream's last %d", applied, info.State.LastSeq)
	case applied+1 < info.State.FirstSeq:
		why = fmt.Sprintf("revisions %d to %d are gone from the stream", applied+1, info.State.FirstSeq-1)
	}
	var rs *jsResync
	ccfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{kvFilter(info.Config, e.bucket)}}
	if why != "" {
		r.logf("replica: %s %s: %s", e.name(), e.stream, why)
		if err := r.beginResync(inc); err != nil {
			return err
		}
		e.seq.Store(0)
		applied = 0
		r.notePosition(0)
		rs = &jsResync{seen: map[string]struct{}{}}
		ccfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	} else {
		ccfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		ccfg.OptStartSeq = applied + 1
	}
	e.last = applied

	// The consumer may live on any replica of the stream, even one that
	// lags behind the leader: it delivers the stream's changes in order,
	// but what it says of the stream (NumPending) may be out of date. So
	// the leader's answers decide when a resync ends and when the replica
	// is caught up.
	rctx, cancel = r.reqCtx(ctx)
	cons, err := s.OrderedConsumer(rctx, ccfg)
	cancel()
	if err != nil {
		return fmt.Errorf("replica: bucket %s: consumer: %w", e.bucket, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return fmt.Errorf("replica: bucket %s: consumer: %w", e.bucket, err)
	}
	defer it.Stop()
	deliveries := make(chan jsDelivery, 256)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			msg, err := it.Next()
			select {
			case deliveries <- jsDelivery{msg, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()

	if rs != nil {
		// Every change of the snapshot is at or before the stream's last
		// sequence now that the consumer exists.
		at := time.Now()
		rctx, cancel := r.reqCtx(ctx)
		info, err := s.Info(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("replica: bucket %s: %w", e.bucket, err)
		}
		rs.target = info.State.LastSeq
		if info.State.Msgs == 0 {
			if err := e.finishResync(r, rs, info.State.LastSeq, at); err != nil {
				return err
			}
			rs = nil
		}
	}

	tick := time.NewTicker(r.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-deliveries:
			if d.err != nil {
				return fmt.Errorf("replica: bucket %s: %w", e.bucket, d.err)
			}
			done, err := e.apply(r, d.msg, rs)
			if err != nil {
				return err
			}
			if done {
				rs = nil
			}
		case <-tick.C:
			if rs, err = e.poll(ctx, r, s, rs); err != nil {
				return err
			}
		case <-r.pollRequested():
			if rs, err = e.poll(ctx, r, s, rs); err != nil {
				return err
			}
		}
	}
}

// apply applies one change, then records its sequence: a replica killed
// between the two applies it again, which leaves the same map. It
// reports whether the change finished a resync.
func (e *jsEngine) apply(r *Replica, msg jetstream.Msg, rs *jsResync) (bool, error) {
	md, err := msg.Metadata()
	if err != nil {
		return false, fmt.Errorf("replica: bucket %s: a change without metadata: %w", e.bucket, err)
	}
	seq := md.Sequence.Stream
	if seq <= e.last {
		// Covered already: a poll found nothing up to a later sequence at
		// the stream leader, and a consumer on a lagging replica of the
		// stream delivers what the leader has removed since.
		return false, nil
	}
	if rs == nil && seq > e.last+1 && e.last+1 < e.firstSeq {
		// Changes after the last applied were removed before they were
		// delivered (limits, purge): what they deleted may be lost.
		return false, r.requestResync(fmt.Sprintf("revisions %d to %d were removed before they were applied", e.last+1, min(seq, e.firstSeq)-1))
	}
	if key, ok := kvKey(msg.Subject()); ok && !IsStateKey(key) {
		h := msg.Headers()
		if len(h) > 0 && h.Get(hdrRollup) == "all" {
			err = r.deleteAllBut(key)
		}
		if err == nil {
			if isDelete(h) {
				err = r.applyDelete(key)
			} else {
				err = r.applyPut(key, msg.Data(), e.expiry(h, md.Timestamp))
			}
		}
		if err != nil {
			return false, err
		}
		if rs != nil {
			rs.seen[string(key)] = struct{}{}
		}
	}
	e.seq.Store(seq)
	e.last = seq
	r.noteApplied(seq, seq+md.NumPending)
	if rs != nil && seq >= rs.target {
		// Every key's last change at the stream leader once the consumer
		// existed is applied. (Not NumPending == 0: the consumer may live
		// on a replica of the stream that lags behind the leader.)
		return true, e.finishResync(r, rs, seq, time.Time{})
	}
	return false, nil
}

// finishResync ends a resync whose snapshot is applied up to seq.
func (e *jsEngine) finishResync(r *Replica, rs *jsResync, seq uint64, at time.Time) error {
	if seq > e.seq.Load() {
		e.seq.Store(seq)
		e.last = seq
		r.notePosition(seq)
	}
	if err := r.finishResync(rs.seen, time.Time{}); err != nil {
		return err
	}
	if !at.IsZero() {
		r.noteHead(seq, at, true)
	}
	return nil
}

// poll asks the stream leader for the stream's state: the head for
// Progress, whether the replica is caught up (for Sync), and whether
// history was removed under it. It returns the resync still under way,
// if any.
func (e *jsEngine) poll(ctx context.Context, r *Replica, s jetstream.Stream, rs *jsResync) (*jsResync, error) {
	at := time.Now()
	rctx, cancel := r.reqCtx(ctx)
	defer cancel()
	info, err := s.Info(rctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return rs, fmt.Errorf("replica: bucket %s: %w", e.bucket, err)
		}
		r.noteErr(fmt.Errorf("replica: bucket %s: %w", e.bucket, err))
		return rs, nil // the consumer resumes on its own when the engine is back
	}
	if incarnation(info) != r.st.Incarnation {
		return rs, r.requestResync("the bucket's stream was created again")
	}
	e.maxAge = info.Config.MaxAge
	e.firstSeq = info.State.FirstSeq
	applied := e.seq.Load()
	caught := applied >= info.State.LastSeq
	if !caught {
		// The changes up to the last sequence may have been removed
		// (purged, expired): ask the leader for the first one left.
		found, err := e.nextAfter(rctx, applied, kvFilter(info.Config, e.bucket))
		if err == nil && !found {
			caught = true
			e.seq.Store(info.State.LastSeq)
			e.last = info.State.LastSeq
			r.notePosition(info.State.LastSeq)
		}
	}
	if rs != nil {
		if !caught {
			r.noteHead(info.State.LastSeq, at, false)
			return rs, nil
		}
		if err := e.finishResync(r, rs, info.State.LastSeq, at); err != nil {
			return rs, err
		}
		return nil, nil
	}
	if caught && uint64(r.keys()) > info.State.NumSubjects && time.Since(e.subjectsResync) >= subjectsResyncEvery {
		// Every key holds a message in the stream, if only a delete
		// marker: more keys than subjects means keys were purged from
		// the stream without markers (a stream purge).
		if r.expiring {
			if _, err := r.m.Sweep(); err != nil {
				return rs, fmt.Errorf("replica: sweeping %s: %w", r.m.Path(), err)
			}
		}
		if uint64(r.keys()) > info.State.NumSubjects {
			e.subjectsResync = time.Now()
			return rs, r.requestResync(fmt.Sprintf("the map holds %d keys, the stream %d subjects: keys were purged", r.keys(), info.State.NumSubjects))
		}
	}
	r.noteHead(info.State.LastSeq, at, caught)
	return rs, nil
}

// nextAfter asks the stream leader whether the stream holds a change of
// the bucket after sequence seq. It uses the JetStream API's message get,
// which the leader answers, not the direct get that KV buckets allow,
// which any replica of the stream answers, lagging or not.
func (e *jsEngine) nextAfter(ctx context.Context, seq uint64, filter string) (bool, error) {
	req, err := json.Marshal(struct {
		Seq  uint64 `json:"seq"`
		Next string `json:"next_by_subj"`
	}{seq + 1, filter})
	if err != nil {
		return false, err
	}
	msg, err := e.js.Conn().RequestWithContext(ctx, e.apiPrefix()+"STREAM.MSG.GET."+e.stream, req)
	if err != nil {
		return false, err
	}
	var resp struct {
		Error *struct {
			Code    int `json:"code"`
			ErrCode int `json:"err_code"`
		} `json:"error"`
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return false, fmt.Errorf("replica: bucket %s: a message get answered %q: %w", e.bucket, msg.Data, err)
	}
	switch {
	case resp.Message != nil:
		return true, nil
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return false, nil
	}
	return false, fmt.Errorf("replica: bucket %s: a message get answered %q", e.bucket, msg.Data)
}

// apiPrefix is the subject prefix of the JetStream API that js uses.
func (e *jsEngine) apiPrefix() string {
	o := e.js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// The writes, through the bucket.

func (e *jsEngine) keyValue(ctx context.Context) (jetstream.KeyValue, error) {
	e.kvMu.Lock()
	defer e.kvMu.Unlock()
	if e.kv != nil {
		return e.kv, nil
	}
	kv, err := e.js.KeyValue(ctx, e.bucket)
	if err != nil {
		return nil, fmt.Errorf("replica: bucket %s: %w", e.bucket, err)
	}
	e.kv = kv
	return kv, nil
}

// jsErr wraps an error of the KV layer with the replica's sentinel.
func (e *jsEngine) jsErr(op string, key []byte, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrInvalidKey):
		return fmt.Errorf("%w: %q: %w", ErrInvalidKey, key, err)
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return fmt.Errorf("%w: %q in bucket %s", ErrNotFound, key, e.bucket)
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %q in bucket %s: %w", ErrConflict, key, e.bucket, err)
	}
	return fmt.Errorf("replica: %s %q in bucket %s: %w", op, key, e.bucket, err)
}

func (e *jsEngine) put(ctx context.Context, key, value []byte) error {
	kv, err := e.keyValue(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, string(key), value); err != nil {
		return e.jsErr("put", key, err)
	}
	return nil
}

func (e *jsEngine) del(ctx context.Context, key []byte) error {
	kv, err := e.keyValue(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, string(key)); err != nil {
		return e.jsErr("delete", key, err)
	}
	return nil
}

func (e *jsEngine) entry(ctx context.Context, key []byte) ([]byte, uint64, error) {
	kv, err := e.keyValue(ctx)
	if err != nil {
		return nil, 0, err
	}
	en, err := kv.Get(ctx, string(key))
	if err != nil {
		return nil, 0, e.jsErr("get", key, err)
	}
	return en.Value(), en.Revision(), nil
}

func (e *jsEngine) update(ctx context.Context, key, value []byte, last uint64) (uint64, error) {
	kv, err := e.keyValue(ctx)
	if err != nil {
		return 0, err
	}
	var rev uint64
	if last == 0 {
		rev, err = kv.Create(ctx, string(key), value)
	} else {
		rev, err = kv.Update(ctx, string(key), value, last)
	}
	if err != nil {
		return 0, e.jsErr("update", key, err)
	}
	return rev, nil
}
