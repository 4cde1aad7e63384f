package ingest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/ingest"
	"github.com/offmap/offmap/replicate/internal/enginetest"
)

// A stream is ingested into a local queue, which a tailer reads: in
// another process just as well, woken by each append.
func Example() {
	tmp, err := os.MkdirTemp("", "ingest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The engine, with three orders in the stream ORDERS.
	engine, err := enginetest.StartNATS(filepath.Join(tmp, "nats"), 1)
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Shutdown()
	nc, err := nats.Connect(engine.URLs())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		log.Fatal(err)
	}
	for _, order := range []string{"apples", "pears", "plums"} {
		if _, err := js.Publish(ctx, "orders.new", []byte(order)); err != nil {
			log.Fatal(err)
		}
	}

	// The ingest, until ctx is cancelled.
	in, err := ingest.New(ingest.Config{
		Dir:       filepath.Join(tmp, "orders"),
		JetStream: &ingest.JetStream{URLs: engine.URLs(), Stream: "ORDERS"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- in.Run(runCtx) }()

	// A local reader.
	t, err := in.Queue().Tailer()
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	for n := 0; n < 3; {
		if err := t.Wait(ctx, queue.Block); err != nil {
			log.Fatal(err)
		}
		for _, msg := range t.All() {
			f, order, err := ingest.Split(msg)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("sequence %d: %s\n", f.Seq, order)
			n++
		}
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.Progress())
	// Output:
	// sequence 1: apples
	// sequence 2: pears
	// sequence 3: plums
	// jetstream:ORDERS stored 3, engine last 3, lag 0, appended 3
}
