module github.com/offmap/offmap/queue/latency

go 1.26.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/offmap/offmap v0.0.0
	golang.org/x/sys v0.50.0
)

require github.com/cespare/xxhash/v2 v2.3.0 // indirect

replace github.com/offmap/offmap => ../..
