package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/queue"
)

// shortTour is the README's first look at a map and a queue, in one
// process for the test; tour_test.go runs it and checks that the README
// shows its code. Every call works the same from several processes.
func shortTour(ctx context.Context, dir string) error {
	// short:begin
	m, err := offmap.Open(filepath.Join(dir, "clients.map"), offmap.Options{}) // starts small, grows
	if err != nil {
		return err
	}
	defer m.Close()
	hits, err := m.AcquireInt64([]byte("user1")) // a counter in the mapped file
	if err != nil {
		return err
	}
	hits.Add(1) // one atomic add, seen by every process, persisted

	q, err := queue.Open(filepath.Join(dir, "orders"), queue.Options{}) // a directory of cycle files
	if err != nil {
		return err
	}
	defer q.Close()
	if _, err := q.Append([]byte("order 1")); err != nil { // lock-free, from any process
		return err
	}
	t, err := q.NamedTailer("billing") // its position persists with Ack
	if err != nil {
		return err
	}
	defer t.Close()
	for t.Wait(ctx, queue.Block) == nil { // sleeps until any process appends
		idx, msg, err := t.Next() // msg is a view into the file
		if err != nil {
			return err
		}
		fmt.Printf("%d: %s (hits %d)\n", idx, msg, hits.Load())
		if err := t.Ack(); err != nil {
			return err
		}
	}
	// short:end
	return ctx.Err()
}
