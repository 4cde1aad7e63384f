module github.com/offmap/offmap

go 1.26.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/cespare/xxhash/v2 v2.3.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)
