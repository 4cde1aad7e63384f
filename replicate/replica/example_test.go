package replica_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/offmap"
	"github.com/offmap/offmap/replicate/internal/enginetest"
	"github.com/offmap/offmap/replicate/replica"
)

// A replica of a JetStream key-value bucket: writes go to the bucket,
// reads are local, and any process on the host reads the map file.
func Example() {
	dir, err := os.MkdirTemp("", "replica-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// An embedded server stands for the JetStream cluster.
	servers, err := enginetest.StartNATS(filepath.Join(dir, "nats"), 1)
	if err != nil {
		log.Fatal(err)
	}
	defer servers.Shutdown()

	nc, err := nats.Connect(servers.URLs()) // credentials and TLS: nats.Options here
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "prices"}); err != nil {
		log.Fatal(err)
	}

	path := filepath.Join(dir, "prices.map")
	r, err := replica.OpenJetStream(path, offmap.Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8}, js, "prices", replica.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	go r.Run(ctx) // applies the bucket's changes; Close stops it

	if err := r.Put(ctx, []byte("EURUSD"), []byte("1.0842")); err != nil { // to the bucket
		log.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil { // until the change has come back
		log.Fatal(err)
	}
	v, err := r.Get([]byte("EURUSD")) // a local read
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("EURUSD %s\n", v)

	// Another process on the host opens the map file and reads it.
	m, err := offmap.Open(path, offmap.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	v, err = m.Get([]byte("EURUSD"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := replica.ReadState(m)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("EURUSD %s as of revision %d of %s\n", v, st.Applied, st.Source)
	// Output:
	// EURUSD 1.0842
	// EURUSD 1.0842 as of revision 1 of KV_prices
}
