// A program outside the repository that uses the published modules:
// .ci/run builds it in an empty module from the proxy modproxy lays out.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/offmap/offmap/metrics"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/mirror"
	"github.com/prometheus/client_golang/prometheus"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "consumer")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m, err := offmap.Open(filepath.Join(dir, "m.map"), offmap.Options{}) // a small map that grows
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Put([]byte("k"), []byte("v")); err != nil {
		return err
	}
	q, err := queue.Open(filepath.Join(dir, "q"), queue.Options{})
	if err != nil {
		return err
	}
	defer q.Close()
	if _, err := q.Append([]byte("hello")); err != nil {
		return err
	}
	mr, err := mirror.NewJetStream(mirror.Config{Queue: q, SourceID: "consumer"},
		mirror.JetStream{URLs: "nats://127.0.0.1:4222", Stream: "S", Subject: "s"}) // nothing connects before Run
	if err != nil {
		return err
	}
	v, err := m.Get([]byte("k"))
	if err != nil {
		return err
	}
	last, err := q.LastIndex()
	if err != nil {
		return err
	}
	c := metrics.NewCollector()
	if err := c.AddOpenMap(m); err != nil {
		return err
	}
	if err := c.AddOpenQueue(q); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		return err
	}
	fmt.Printf("ok: map k=%s, queue last index %d, mirror sent %d, %d metric families\n", v, last, mr.Progress().Sent, len(fams))
	return nil
}
