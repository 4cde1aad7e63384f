// Package latency holds the queue's cross-process latency benchmark. It is
// a module of its own so that the HDR histogram it uses stays out of the
// library's go.mod:
//
//	cd queue/latency && go test -run '^$' -bench . -benchtime 1x
package latency
