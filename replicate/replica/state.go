package replica

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/offmap/offmap/offmap"
)

// The replica keeps its state in its own map file, under keys that begin
// with StatePrefix (a zero byte, which no JetStream key can hold):
//
//	"\x00offmap-replica"        the source and mode, as JSON (State)
//	"\x00offmap-replica/seq"    JetStream: the last stream sequence applied,
//	                            8 bytes in the machine's byte order
//	"\x00offmap-replica/p/N"    Kafka: the next offset to apply in partition N,
//	                            8 bytes in the machine's byte order
//
// The position words are value handles (offmap's AcquireUint64): storing
// one is one atomic store into the mapped file, made after the change it
// covers, so a process killed at any instant leaves a position no later
// than what the map holds (see the package documentation).

// StatePrefix begins every key under which a replica keeps its state in
// its map. Iterate with Replica.All, or skip keys for which IsStateKey is
// true, to see only the replicated keys.
const StatePrefix = "\x00offmap-replica"

var (
	stateKey = []byte(StatePrefix)
	seqKey   = []byte(StatePrefix + "/seq")
)

func partitionKey(p int32) []byte {
	return []byte(StatePrefix + "/p/" + strconv.Itoa(int(p)))
}

// IsStateKey reports whether key is one of the keys a replica keeps its
// own state under (it begins with StatePrefix).
func IsStateKey(key []byte) bool {
	return len(key) > 0 && key[0] == 0 && bytes.HasPrefix(key, stateKey)
}

// State is what a replica keeps in its map about where it stands. A
// process that only reads the map reads it with ReadState, to learn which
// revision its reads reflect.
type State struct {
	// Engine is "jetstream" or "kafka".
	Engine string `json:"engine"`
	// Source is the stream (JetStream: KV_<bucket>) or topic replicated.
	Source string `json:"source"`
	// Incarnation tells a source apart from one deleted and created again
	// under the same name: the stream's creation time, or the topic's ID.
	Incarnation string `json:"incarnation,omitempty"`
	// Resyncing: a full resync began and has not finished; the map may
	// still hold keys the source deleted, and the next Run starts the
	// resync over.
	Resyncing bool `json:"resyncing,omitempty"`
	// CaughtUp is the last instant at which the replica had applied every
	// change the engine held, as recorded (Kafka records it every few
	// seconds; JetStream does not need it and leaves it zero).
	CaughtUp time.Time `json:"caught_up,omitzero"`
	// Partitions is how many partitions of a Kafka topic have a position.
	Partitions int `json:"partitions,omitempty"`

	// Applied is, for JetStream, the stream sequence (the bucket's
	// revision) of the last change applied.
	Applied uint64 `json:"-"`
	// Offsets is, for Kafka, the next offset to apply in each partition
	// (every record before it is applied).
	Offsets []int64 `json:"-"`
}

// ReadState reads the replica state kept in m, a map file that a replica
// process keeps. It returns an error wrapping ErrNotReplica if m holds
// none.
func ReadState(m *offmap.Map) (State, error) {
	var st State
	b, err := m.Get(stateKey)
	if errors.Is(err, offmap.ErrNotFound) {
		return st, fmt.Errorf("%w: %s holds no replica state", ErrNotReplica, m.Path())
	}
	if err != nil {
		return st, fmt.Errorf("replica: reading the state of %s: %w", m.Path(), err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%w: %s: the replica state is damaged: %v", offmap.ErrCorrupt, m.Path(), err)
	}
	switch st.Engine {
	case engineJetStream:
		st.Applied, err = readPosition(m, seqKey)
	case engineKafka:
		if st.Partitions < 0 || st.Partitions > maxPartitions {
			return st, fmt.Errorf("%w: %s: the replica state names %d partitions", offmap.ErrCorrupt, m.Path(), st.Partitions)
		}
		st.Offsets = make([]int64, st.Partitions)
		for p := range st.Partitions {
			var n uint64
			n, err = readPosition(m, partitionKey(int32(p)))
			if err != nil {
				break
			}
			st.Offsets[p] = int64(n)
		}
	default:
		return st, fmt.Errorf("%w: %s: the replica state names engine %q", offmap.ErrCorrupt, m.Path(), st.Engine)
	}
	if err != nil {
		return st, fmt.Errorf("replica: reading the state of %s: %w", m.Path(), err)
	}
	return st, nil
}

// maxPartitions bounds the partitions a state may name, so that a damaged
// state cannot make ReadState allocate without limit.
const maxPartitions = 1 << 20

// readPosition reads a position word; an absent one is 0 (nothing applied).
func readPosition(m *offmap.Map, key []byte) (uint64, error) {
	b, err := m.Get(key)
	if errors.Is(err, offmap.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: position %q holds %d bytes, not 8", offmap.ErrCorrupt, key, len(b))
	}
	return binary.NativeEndian.Uint64(b), nil
}

func encodeState(st *State) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("replica: encoding the state: %w", err)
	}
	return b, nil
}
