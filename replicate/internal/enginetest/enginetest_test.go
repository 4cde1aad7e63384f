package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestNATSClusterSurvivesNode stores into an R3 stream, stops a node,
// stores more, restarts it and reads every message back.
func TestNATSClusterSurvivesNode(t *testing.T) {
	c, err := StartNATS(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Placement may still see a peer as offline for a moment after the
	// cluster formed.
	for {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Replicas: 3, Storage: jetstream.FileStorage})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	publish := func(n int) {
		for range n {
			for {
				if _, err := js.Publish(ctx, "s", []byte("x")); err == nil {
					break
				} else if ctx.Err() != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	publish(10)
	c.Stop(0)
	publish(10)
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	publish(10)
	s, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 30 {
		t.Fatalf("stream holds %d messages, want 30", info.State.Msgs)
	}
}

// TestKafka produces to a kfake topic and reads it back.
func TestKafka(t *testing.T) {
	c, err := StartKafka(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "v" {
		t.Fatalf("read %d records", fs.NumRecords())
	}
}
