package eda

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/offmap/offmap/bench/latency"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/values"
)

// topicName is topic k of instance i: topic<random><k>, the random number
// drawn from the run's seed so that every process of a run agrees on it.
func topicName(seed uint32, i, k int) string {
	return fmt.Sprintf("topic%010d%d", seed+uint32(i)*2654435761, k)
}

// instance is one chain: out[k] produces topic k, in[k] consumes it. A
// process opens only the ends it serves.
type instance struct {
	id  int
	out [Services + 1]Producer
	in  [Services + 1]Consumer

	queues   [Services + 1]*queue.Queue  // behind out, for prefetching (nil: not a queue)
	tailers  [Services + 1]*queue.Tailer // of the consumers an event loop serves
	counters [Services]values.Int64      // in the shared map, for the services run here
	handled  [Services]int64             // messages each service run here handled
	received atomic.Int64                // messages the receiver got

	ahead2, ahead3, ahead4 *instance // sent two, three and four after this one (prefetchAhead)
}

// chain is the state a process shares among its goroutines.
type chain struct {
	plan      plan
	rec       *recorder
	instances []*instance
	counters  *offmap.Map
	bad       atomic.Int64 // malformed or miscounted messages

	serviceProbes bool // record each service's hop
}

// openCounters opens the counter map shared by every process of a run.
func openCounters(dir string, instances int) (*offmap.Map, error) {
	return offmap.Open(filepath.Join(dir, "counters.map"), offmap.Options{
		Entries:          instances*Services + 16,
		AverageKeySize:   13,
		AverageValueSize: 8,
	})
}

func counterKey(i, service int) []byte { return fmt.Appendf(nil, "i%06d-s%d", i, service) }

// openEnds opens, for instance i, the producers of topics in outs and the
// consumers of topics in ins, and the counters of the services it will run.
func (c *chain) open(t Transport, seed uint32, i int, outs, ins []int, services []int) (*instance, error) {
	in := &instance{id: i}
	opened := map[int]bool{}
	topic := func(k int) error {
		if opened[k] {
			return nil
		}
		p, cons, err := t.Topic(topicName(seed, i, k))
		if err != nil {
			return err
		}
		in.out[k], in.in[k] = p, cons
		in.queues[k], _ = queueOf(p)
		opened[k] = true
		return nil
	}
	for _, k := range append(append([]int(nil), outs...), ins...) {
		if err := topic(k); err != nil {
			return nil, err
		}
	}
	for _, s := range services {
		h, err := c.counters.AcquireInt64(counterKey(i, s))
		if err != nil {
			return nil, err
		}
		in.counters[s-1] = h
	}
	return in, nil
}

var errBadMessage = errors.New("eda: malformed message")

// send publishes instance in's message scheduled at due.
func (c *chain) send(in *instance, due int64, buf []byte) error {
	m := message{scheduled: due, sent: latency.Nanotime()}
	return in.out[0].Send(m.encode(buf))
}

// serve is service s (1..5) of instance in handling a message from topic
// s-1: record its hop, add to the counters, increment the value and
// forward it to topic s.
func (c *chain) serve(in *instance, s int, msg, buf []byte, shard int) error {
	m, ok := decode(msg)
	if !ok {
		c.bad.Add(1)
		return errBadMessage
	}
	if c.serviceProbes {
		c.rec.record(shard, probeHop1+s-1, m.scheduled, latency.Nanotime()-m.scheduled)
	}
	in.counters[s-1].Add(1)
	in.handled[s-1]++
	m.value++
	return in.out[s].Send(m.encode(buf))
}

// receive is the receiver of instance in handling a message from topic 5.
func (c *chain) receive(in *instance, msg []byte, shard int) {
	m, ok := decode(msg)
	if !ok || m.value != Services {
		c.bad.Add(1)
	}
	now := latency.Nanotime()
	c.rec.record(shard, probeEndToEnd, m.scheduled, now-m.scheduled)
	c.rec.record(shard, probeUncorrected, m.scheduled, now-m.sent)
	in.received.Add(1)
}

// handle dispatches a message read from topic k of instance in.
func (c *chain) handle(in *instance, k int, msg, buf []byte, shard int) error {
	if k == Services {
		c.receive(in, msg, shard)
		return nil
	}
	return c.serve(in, k+1, msg, buf, shard)
}
