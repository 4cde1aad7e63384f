// Command requestcount keeps a count of requests per client in a map file
// that outlives the process, as in Chronicle Map's getting-started example:
// each run counts one more request for each client and prints the totals.
//
//	go run ./examples/requestcount            # user1 requests: 1, then 2, 3, ...
//	go run ./examples/requestcount -map /tmp/counts.map
//
// The count is a value handle into the mapped file: the increment is one
// atomic add, persisted without a put, and runs started at the same time
// never lose one.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/offmap/offmap/offmap"
)

func main() {
	path := flag.String("map", "requestcount.map", "map file (created if absent)")
	flag.Parse()
	if err := run(*path); err != nil {
		fmt.Fprintln(os.Stderr, "requestcount:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	m, err := offmap.Open(path, offmap.Options{
		Entries:          1000, // room for 1000 clients to start; it grows past them
		AverageKeySize:   8,
		AverageValueSize: 8, // an int64 count
	})
	if err != nil {
		return err
	}
	defer m.Close()
	for _, client := range []string{"user1", "user2", "user3"} {
		requests, err := m.AcquireInt64([]byte(client))
		if err != nil {
			return err
		}
		fmt.Printf("%s requests: %d\n", client, requests.Add(1))
	}
	return nil
}
