// Package eda is the event-driven-architecture chain benchmark of the
// Chronicle EDA article (its comparison of Kafka with Chronicle Queue;
// docs/BENCHMARKS.md gives its title), in Go, over any transport.
//
// An instance is a sender, five services and a receiver linked by six
// topics named topic<random><0..5>:
//
//	sender -> topic0 -> service1 -> topic1 -> ... -> service5 -> topic5 -> receiver
//
// The sender publishes a message at a fixed rate (1,000 a second by
// default): its scheduled send time, its actual send time and an int32
// that each service increments. Each service also adds one to a counter
// for its (instance, service) pair in one offmap map shared by every
// instance and process, and the run checks at the end that every counter
// equals the messages its service handled. The receiver records the
// latency from the scheduled send time (corrected for coordinated
// omission) and from the actual send time (uncorrected), and each service
// records the latency up to its hop on a probe of its own.
//
// One pacer releases the sends of all instances (latency.Schedule); how
// services wait for messages is the wait mode:
//
//   - Park, the Chronicle EDA article's loop: each service polls its topic and, when it
//     is empty, sleeps for 1/8 of the inter-message time;
//   - Block: each service blocks in its topic until a message arrives;
//   - Loop, the project's design: a few event-loop goroutines serve every
//     service of many instances as handlers, wait on all their topics at
//     once (queue.WaitSet) and drain every message ready, so a message usually
//     crosses all six topics in one pass with no goroutine woken per hop;
//     a loop with time to spare releases the sends of another loop's
//     instances that are overdue (group.go).
//
// and where they run is the placement: all instances in one process, one
// process per instance, or one process per service.
package eda
