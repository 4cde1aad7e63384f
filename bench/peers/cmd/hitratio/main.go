// Command hitratio prints the hit ratio of each eviction policy of
// package hitratio on each trace, at capacities of 1 % and 10 % of the
// keys, as a Markdown table (docs/COMPARISON.md).
//
//	go run ./cmd/hitratio [-keys 1000000] [-requests 3000000] [-shared]
//
// -shared compares one cache shared by two processes instead: offmap's
// map that evicts against Redis with allkeys-lru (shared.go).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/offmap/offmap/bench/peers/hitratio"
)

func main() {
	keys := flag.Int("keys", 1_000_000, "distinct keys of the Zipf traces")
	requests := flag.Int("requests", 3_000_000, "requests per trace; the first third warms the cache and is not counted")
	sharedOnly := flag.Bool("shared", false, "compare one cache shared by two processes: offmap against Redis")
	flag.Parse()
	if *childPart >= 0 {
		if err := runChild(*keys, *requests); err != nil {
			fmt.Fprintln(os.Stderr, "hitratio:", err)
			os.Exit(1)
		}
		return
	}
	if *sharedOnly {
		if err := shared(*keys, *requests); err != nil {
			fmt.Fprintln(os.Stderr, "hitratio:", err)
			os.Exit(1)
		}
		return
	}
	start := time.Now()
	fmt.Printf("keys %d, requests %d per trace (hit ratios over the last two thirds); %s/%s, %s\n\n",
		*keys, *requests, runtime.GOOS, runtime.GOARCH, start.UTC().Format(time.RFC3339))
	for _, pct := range []int{1, 10} {
		capacity := *keys * pct / 100
		traces := []hitratio.Trace{
			hitratio.ZipfTrace(*keys, *requests, 0.7, 1),
			hitratio.ZipfTrace(*keys, *requests, 0.9, 2),
			hitratio.ZipfTrace(*keys, *requests, 1.1, 3),
			// A scan of as many cold keys as the cache holds after every
			// 5 capacities of requests: a sixth of the requests.
			hitratio.ScanTrace(*keys, *requests, 0.9, 5*capacity, capacity, 4),
		}
		fmt.Printf("capacity %d entries (%d %% of the keys)\n\n| policy |", capacity, pct)
		for _, t := range traces {
			fmt.Printf(" %s |", t.Name)
		}
		fmt.Printf("\n| --- |%s\n", strings.Repeat(" ---: |", len(traces)))
		for _, p := range hitratio.Policies {
			fmt.Printf("| %s |", p.Name)
			for _, t := range traces {
				r := hitratio.HitRatio(p.New(capacity), t, len(t.Keys)/3)
				fmt.Printf(" %.2f %% |", 100*r)
			}
			fmt.Println()
		}
		fmt.Println()
	}
	fmt.Fprintf(os.Stderr, "took %v\n", time.Since(start).Round(time.Second))
}
