// Package edasplit runs the EDA chain benchmark (bench/eda) split over two
// hosts bridged through an engine, and the same chain run entirely on that
// engine, so that one command can say how many instances each keeps under
// the chain's SLA (p99.9 under 100 ms at 1,000 messages a second each).
//
// The split: services 1 and 2 run on host A, services 3 to 5 on host B.
// Topic 2, which service 2 writes and service 3 reads, is the only one that
// crosses between them:
//
//	host A: sender -> topic0 -> service1 -> topic1 -> service2 -> queue A/topic2
//	        mirror (replicate/mirror): queue A/topic2 -> JetStream stream topic2
//	host B: ingest (replicate/ingest): stream topic2 -> queue B/topic2
//	        service3 -> topic3 -> service4 -> topic4 -> service5 -> topic5 -> receiver
//
// Every other topic is a plain offmap queue (eda.Queues) in its host's
// directory. Service 3 reads host B's queue and drops the ingest's 16-byte
// frame (ingest.Split), checking on the way that the engine's sequences
// come without a gap or a repeat. That is the deployment replicate is for:
// memory-speed queues within each host, the engine only where data leaves
// one.
//
// By default each instance's topic 2 has a bridge of its own (a queue and
// a mirror on A, a stream, an ingest and a queue on B), as each of the
// chain's topics is a queue or a stream of its own everywhere else;
// SplitOptions.Shared carries every instance's topic 2 over one bridge
// instead, each message tagged with its topic.
//
// The "hosts" are two directories on this machine, and the mirrors and
// ingests run in-process as goroutines, beside an embedded JetStream (one
// node, or a cluster of three on loopback: Engine) that the transport
// starts in the run's directory. All of it shares this machine's CPUs
// with the chain, and all of its CPU is in the run's figure. Clients still
// reach the engine over TCP, host A's through node 1 and host B's through
// node 2 of a cluster, so that the bridge crosses nodes as it would
// between machines; only the network's own latency is missing.
//
// AllOnEngine is the comparison: the whole chain on JetStream, six streams
// per instance on the same engine.
//
// Only the in-process placement is possible (eda.Config.Transport), and
// only the Park and Block wait modes: eda's event loops (eda.Loop) need
// every consumer to be an offmap queue tailer of eda's own, and the
// bridged consumer strips a frame first.
package edasplit
