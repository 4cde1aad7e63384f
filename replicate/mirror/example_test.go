package mirror_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/queue"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/mirror"
)

// Mirror a queue to a JetStream stream (here an embedded server), then
// read the stream back: each message carries its source and queue index.
func Example() {
	dir, err := os.MkdirTemp("", "mirror-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := enginetest.StartNATS(dir+"/nats", 1)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.URLs())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS_A", Subjects: []string{"orders.a"}})
	if err != nil {
		log.Fatal(err)
	}

	q, err := queue.Open(dir+"/orders", queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	for _, order := range []string{"buy 10", "sell 5", "buy 2"} {
		if _, err := q.Append([]byte(order)); err != nil {
			log.Fatal(err)
		}
	}

	m, err := mirror.NewJetStream(mirror.Config{Queue: q, TailerName: "to-nats", SourceID: "host-a/orders"},
		mirror.JetStream{Conn: nc, Stream: "ORDERS_A", Subject: "orders.a"})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- m.Run(runCtx) }()
	for m.Progress().Acked < 3 { // a real mirror runs until SIGTERM
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	p := m.Progress()
	fmt.Printf("sent %d, acknowledged %d\n", p.Sent, p.Acked)

	first, err := q.FirstIndex()
	if err != nil {
		log.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			log.Fatal(err)
		}
		idx, err := strconv.ParseUint(msg.Header.Get(mirror.HeaderIndex), 10, 64)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s from %s, queue index first+%d\n", msg.Data, msg.Header.Get(mirror.HeaderSource), idx-first)
	}
	// Output:
	// sent 3, acknowledged 3
	// buy 10 from host-a/orders, queue index first+0
	// sell 5 from host-a/orders, queue index first+1
	// buy 2 from host-a/orders, queue index first+2
}
