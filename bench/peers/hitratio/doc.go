// Package hitratio measures the hit ratio of cache eviction policies on
// the same access traces at the same capacity in entries, to choose the
// policy of an evicting offmap map by measurement (issue 28): models of
// what a shared map file can hold (CLOCK, SIEVE, S3-FIFO, each with the
// per-entry state they need) against an exact LRU and the in-process Go
// caches users would otherwise pick (github.com/maypok86/otter/v2,
// github.com/Yiling-J/theine-go, github.com/dgraph-io/ristretto/v2).
//
// Traces: Zipf over 1M keys with s = 0.7, 0.9 and 1.1 (ZipfTrace), and a
// scan-resistance trace (ScanTrace): Zipf 0.9 with a sequential scan of
// as many cold keys as the cache holds (each seen once) after every five
// capacities of requests. Every policy sees the same requests; a miss inserts the key.
// The command is cmd/hitratio.
package hitratio
