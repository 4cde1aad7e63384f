// Package replicate takes offmap past one machine through engines that
// operators already run: NATS JetStream and Kafka. offmap stays the
// memory-speed local end on every host; the engine carries data between
// hosts and decides its order.
//
//   - mirror: every message of a local queue to a JetStream stream or a
//     Kafka topic, in order, exactly once at the engine across crashes.
//   - ingest: a stream or topic into a local queue on another host,
//     resuming without gaps or duplicates.
//   - replica: a local map that mirrors a JetStream key-value bucket or a
//     compacted Kafka topic; reads are local Gets.
//
// This is a Go module of its own, so that the offmap library's go.mod
// keeps only its own dependencies.
package replicate
