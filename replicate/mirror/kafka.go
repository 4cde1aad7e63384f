package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/offmap/offmap/replicate/internal/kafkaoffset"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka names the target of a mirror to Kafka.
type Kafka struct {
	// Seeds are the seed brokers (host:port).
	Seeds []string
	// Options are passed to kgo.NewClient after the seeds (credentials,
	// TLS, dialer, logger, ...). The mirror's own producer options come
	// after them and win: TransactionalID, RecordPartitioner,
	// MaxBufferedRecords. The client that reads the partition back on
	// start gets Options too.
	Options []kgo.Opt
	// Topic is the topic, which must exist and not be compacted.
	Topic string
	// Partition is the partition all the messages go to (Kafka orders a
	// partition only). Other producers may write to it too.
	Partition int32
	// TransactionalID is the producer's transactional ID, which must be
	// the same across restarts and used by no one else. Default
	// "offmap-mirror/" + SourceID + "/" + Topic + "/" + Partition.
	TransactionalID string
}

// NewKafka returns a mirror of the queue in cfg to a Kafka partition.
// Nothing connects before Run.
func NewKafka(cfg Config, target Kafka) (*Mirror, error) {
	if len(target.Seeds) == 0 || target.Topic == "" || target.Partition < 0 {
		return nil, fmt.Errorf("%w: Kafka needs Seeds, Topic and a Partition >= 0", ErrConfig)
	}
	return newMirror(cfg, func(m *Mirror) (engine, error) {
		if target.TransactionalID == "" {
			target.TransactionalID = fmt.Sprintf("offmap-mirror/%s/%s/%d", m.cfg.SourceID, target.Topic, target.Partition)
		}
		return &kafkaEngine{m: m, t: target}, nil
	})
}

type kafkaEngine struct {
	m *Mirror
	t Kafka
}

func (e *kafkaEngine) shutdown() {}

func (e *kafkaEngine) open(ctx context.Context, a *acker, _ context.CancelCauseFunc) (session, uint64, bool, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(e.t.Seeds...)}, e.t.Options...)
	opts = append(opts,
		kgo.TransactionalID(e.t.TransactionalID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Produce never blocks: a transaction holds MaxInFlight records.
		kgo.MaxBufferedRecords(e.m.cfg.MaxInFlight+1),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, 0, false, fatal(fmt.Errorf("%w: kafka client: %v", ErrConfig, err))
	}
	rctx, cancel := context.WithTimeout(ctx, e.m.cfg.Timeout)
	defer cancel()
	// Fence the previous instance first: this aborts its open
	// transaction and has the brokers refuse what it still sends, so that
	// what is read next cannot change under us.
	if _, _, err := cl.ProducerID(rctx); err != nil {
		cl.Close()
		return nil, 0, false, fmt.Errorf("mirror: kafka: init producer id %q: %w", e.t.TransactionalID, err)
	}
	// Reading back may take long on a partition others write much to:
	// each request has Timeout, not the whole.
	last, found, err := e.lastIndex(ctx, cl)
	if err != nil {
		cl.Close()
		return nil, 0, false, err
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, 0, false, fmt.Errorf("mirror: kafka: begin transaction: %w", err)
	}
	return &kafkaSession{e: e, cl: cl, a: a, src: []byte(e.m.cfg.SourceID)}, last, found, nil
}

// lastIndex finds the index of the last committed record of the source in
// the partition: it reads back windows of growing size from the end.
func (e *kafkaEngine) lastIndex(ctx context.Context, cl *kgo.Client) (uint64, bool, error) {
	start, err := e.listOffset(ctx, cl, kafkaoffset.Earliest)
	if err != nil {
		return 0, false, err
	}
	end, err := e.listOffset(ctx, cl, kafkaoffset.Latest)
	if err != nil {
		return 0, false, err
	}
	for w := int64(1024); ; w *= 8 {
		from := max(start, end-w)
		if from >= end {
			return 0, false, nil
		}
		idx, found, err := e.scan(ctx, from, end)
		if err != nil || found || from == start {
			return idx, found, err
		}
	}
}

// listOffset returns the partition's start (kafkaoffset.Earliest) or end
// (Latest: the high watermark, as read_uncommitted), within the timeout.
func (e *kafkaEngine) listOffset(ctx context.Context, cl *kgo.Client, ts int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, e.m.cfg.Timeout)
	defer cancel()
	off, err := kafkaoffset.List(ctx, cl, e.t.Topic, e.t.Partition, ts)
	if err != nil {
		return 0, fmt.Errorf("mirror: kafka: %w", err)
	}
	return off, nil
}

// scan reads the records at offsets [from, end) and returns the index of
// the last committed record of the source among them. It keeps control
// records, so that it sees each transaction's commit or abort marker, and
// so that the record at end-1 (a marker or data) always comes.
func (e *kafkaEngine) scan(ctx context.Context, from, end int64) (uint64, bool, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(e.t.Seeds...)}, e.t.Options...)
	opts = append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.t.Topic: {e.t.Partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, false, fatal(fmt.Errorf("%w: kafka client: %v", ErrConfig, err))
	}
	defer cl.Close()
	var (
		best    uint64
		found   bool
		open    = map[int64]uint64{} // producer id -> last index in its open transaction
		perr    error
		reached bool
	)
	for !reached {
		pctx, cancel := context.WithTimeout(ctx, e.m.cfg.Timeout)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fs.Err(); err != nil {
			if pctx.Err() != nil && ctx.Err() == nil {
				return 0, false, fmt.Errorf("%w: reading %s/%d back from offset %d to %d: %v", ErrTimeout, e.t.Topic, e.t.Partition, from, end, err)
			}
			return 0, false, fmt.Errorf("mirror: kafka: read %s/%d back: %w", e.t.Topic, e.t.Partition, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end-1 {
				reached = true
			}
			if r.Offset >= end || perr != nil {
				return
			}
			if r.Attrs.IsControl() {
				var key kmsg.ControlRecordKey
				if key.ReadFrom(r.Key) != nil {
					return
				}
				idx, ok := open[r.ProducerID]
				delete(open, r.ProducerID)
				if ok && key.Type == kmsg.ControlRecordKeyTypeCommit && (!found || idx > best) {
					best, found = idx, true
				}
				return
			}
			idx, ok, err := e.recordIndex(r)
			if err != nil {
				perr = err
				return
			}
			if !ok {
				return
			}
			if r.Attrs.IsTransactional() {
				open[r.ProducerID] = idx
			} else if !found || idx > best {
				best, found = idx, true
			}
		})
	}
	return best, found, perr
}

// recordIndex returns the index of a record of this source.
func (e *kafkaEngine) recordIndex(r *kgo.Record) (uint64, bool, error) {
	var src, index []byte
	var hasIndex bool
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderSource:
			src = h.Value
		case HeaderIndex:
			index, hasIndex = h.Value, true
		}
	}
	if string(src) != e.m.cfg.SourceID {
		return 0, false, nil
	}
	idx, err := strconv.ParseUint(string(index), 10, 64)
	if !hasIndex || err != nil {
		return 0, false, fatal(fmt.Errorf("%w: record at %s/%d offset %d of source %q has index header %q", ErrConfig, e.t.Topic, e.t.Partition, r.Offset, e.m.cfg.SourceID, index))
	}
	return idx, true, nil
}

type kafkaSession struct {
	e   *kafkaEngine
	cl  *kgo.Client
	a   *acker
	src []byte

	n    int    // records in the open transaction
	last uint64 // index of its last record

	errMu sync.Mutex
	err   error // the first produce error of the transaction

	mem recordMemory
}

// recordMemory holds the records of the open transaction, their headers
// and their bytes, in blocks that serve transaction after transaction:
// once a transaction is committed (flushed), the client has let go of all
// of its records. A payload must be copied: the view into the queue is
// valid only until the tailer moves to another cycle file, and the client
// sends it later.
type recordMemory struct {
	recs       [][]kgo.Record
	hdrs       [][]kgo.RecordHeader
	bytes      [][]byte
	r, b, used int // next block of recs (and hdrs), of bytes; bytes used in it
	at         int // next record in recs[r]
}

const (
	recordBlock = 256     // records per block
	byteBlock   = 1 << 20 // bytes per block, unless a payload is larger
	// txnBytes bounds the bytes of one transaction, as MaxInFlight
	// bounds its records: a transaction is committed when it reaches
	// either.
	txnBytes = 16 << 20
)

// record returns a record for idx and payload, headers set, its memory
// taken from the blocks.
func (m *recordMemory) record(topic string, partition int32, src []byte, idx uint64, payload []byte) *kgo.Record {
	if m.r == len(m.recs) || m.at == recordBlock {
		if m.at == recordBlock {
			m.r++
			m.at = 0
		}
		if m.r == len(m.recs) {
			m.recs = append(m.recs, make([]kgo.Record, recordBlock))
			m.hdrs = append(m.hdrs, make([]kgo.RecordHeader, 2*recordBlock))
		}
	}
	r := &m.recs[m.r][m.at]
	h := m.hdrs[m.r][2*m.at : 2*m.at+2 : 2*m.at+2]
	m.at++
	value := m.alloc(len(payload))
	copy(value, payload)
	index := strconv.AppendUint(m.alloc(20)[:0], idx, 10)
	h[0] = kgo.RecordHeader{Key: HeaderSource, Value: src}
	h[1] = kgo.RecordHeader{Key: HeaderIndex, Value: index}
	*r = kgo.Record{Topic: topic, Partition: partition, Value: value, Headers: h}
	return r
}

// alloc returns n bytes from the blocks.
func (m *recordMemory) alloc(n int) []byte {
	if m.b < len(m.bytes) && m.used+n > len(m.bytes[m.b]) {
		m.b++
		m.used = 0
	}
	for m.b < len(m.bytes) && n > len(m.bytes[m.b]) {
		m.b++ // a block too small for a large payload stays for later
	}
	if m.b == len(m.bytes) {
		m.bytes = append(m.bytes, make([]byte, max(byteBlock, n)))
	}
	p := m.bytes[m.b][m.used : m.used+n : m.used+n]
	m.used += n
	return p
}

// size is the number of bytes taken.
func (m *recordMemory) size() int { return m.b*byteBlock + m.used }

// reset makes all the memory free again, after a commit.
func (m *recordMemory) reset() { m.r, m.at, m.b, m.used = 0, 0, 0, 0 }

func (s *kafkaSession) send(_ context.Context, idx uint64, payload []byte) error {
	if err := s.produceErr(); err != nil {
		return err
	}
	s.cl.Produce(context.Background(), s.mem.record(s.e.t.Topic, s.e.t.Partition, s.src, idx, payload), s.promise)
	s.a.m.sent.Add(1)
	s.n++
	s.last = idx
	if s.n >= s.e.m.cfg.MaxInFlight || s.mem.size() >= txnBytes {
		return s.commit()
	}
	return nil
}

func (s *kafkaSession) promise(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
}

func (s *kafkaSession) produceErr() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err != nil {
		return fmt.Errorf("mirror: kafka: produce to %s/%d: %w", s.e.t.Topic, s.e.t.Partition, s.err)
	}
	return nil
}

func (s *kafkaSession) idle(context.Context) error {
	if s.n == 0 {
		return nil
	}
	return s.commit()
}

// commit commits the open transaction, records it in the tailer and
// begins the next. It does not depend on Run's context: a commit under
// way when Run is stopped completes.
func (s *kafkaSession) commit() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.e.m.cfg.Timeout)
	defer cancel()
	if err := s.cl.Flush(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %d records not acknowledged within %v", ErrTimeout, s.n, s.e.m.cfg.Timeout)
		}
		return fmt.Errorf("mirror: kafka: flush: %w", err)
	}
	if err := s.produceErr(); err != nil {
		return err
	}
	if err := s.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("mirror: kafka: commit: %w", err)
	}
	if err := s.a.through(s.last); err != nil {
		return err
	}
	s.n = 0
	s.mem.reset()
	if err := s.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("mirror: kafka: begin transaction: %w", err)
	}
	return nil
}

func (s *kafkaSession) finish() error {
	if s.n == 0 {
		return nil
	}
	return s.commit()
}

func (s *kafkaSession) close() {
	s.cl.Close()
}
