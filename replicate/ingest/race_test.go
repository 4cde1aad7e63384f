//go:build race

package ingest

// raceEnabled: the race detector slows the embedded engines, which run in
// the test process, about tenfold; the multi-process tests send fewer
// messages under it.
const raceEnabled = true
