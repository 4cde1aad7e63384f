// Package peers measures offmap against the systems its users would pick
// instead, on the same machine, with the same workloads, in one run.
//
// Map workload (RunMaps): 1,000,000 entries of 16-byte keys and 8-byte
// values, keys laid out contiguously in the (random) order they are
// visited, as in offmap's own benchmarks: insert from empty, get of random
// existing keys, update, counter increment (read-modify-write), the size
// of the data on disk, and two OS processes incrementing the same 1,000
// counters with the exact final sum checked. Peers: offmap (Put/Update and
// value handles), go.etcd.io/bbolt, LMDB through github.com/PowerDNS/lmdb-go
// (no-sync and default), Redis over loopback, VictoriaMetrics/fastcache
// (in-process, not shared) and a Go map with a sync.RWMutex (the in-process
// floor).
//
// Queue workload (RunEDA): the EDA chain of bench/eda with the transport
// swapped: offmap queues, NATS JetStream with file storage (an embedded
// server), the Kafka wire protocol through franz-go's kfake in-process
// cluster and the kgo client (a protocol stand-in: a real Kafka broker
// cannot be installed on these machines), and Redis Streams.
//
// Redis runs as a real redis-server from Debian's packages, installed when
// missing (StartRedis) and started on a free loopback port.
//
// Package hitratio and cmd/hitratio compare the hit ratios of eviction
// policies (the models an evicting map could use, and in-process Go
// caches) on the same traces.
//
// The command is cmd/peers; it prints every table. Programs that run the
// two-process counters must call ChildMain when started with ChildArg.
package peers
