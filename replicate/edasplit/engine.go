package edasplit

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/offmap/offmap/replicate/internal/enginetest"
)

// Engine says which JetStream the transports start for a run.
//
// Each transport starts its own engine in the run's directory and shuts it
// down when eda.Run closes the transport: a setting then starts from an
// empty engine (no streams of the last setting still replicating or
// expiring), its store is deleted with the run's directory, and its CPU,
// since the servers run in this process, is in the run's figure, as
// bench/peers counts its embedded NATS server.
type Engine struct {
	// Nodes is the number of nats-server nodes: 1 (a single server) or
	// 3 (a cluster on loopback, the smallest that survives the loss of a
	// node). Zero means 1.
	Nodes int
	// Replicas is each stream's replication factor (at most Nodes). Zero
	// means Nodes: a cluster is run for its replication, and R1 streams
	// on a cluster would only add a hop to a leader elsewhere.
	Replicas int
}

func (e Engine) norm() (Engine, error) {
	if e.Nodes == 0 {
		e.Nodes = 1
	}
	if e.Replicas == 0 {
		e.Replicas = e.Nodes
	}
	if e.Nodes < 1 || e.Replicas < 1 || e.Replicas > e.Nodes {
		return e, fmt.Errorf("edasplit: %d nodes and %d replicas: want 1 <= replicas <= nodes", e.Nodes, e.Replicas)
	}
	return e, nil
}

// String describes the engine in reports: "JetStream, 3 nodes, R3".
func (e Engine) String() string {
	e, _ = e.norm()
	nodes := "1 node"
	if e.Nodes > 1 {
		nodes = fmt.Sprintf("%d nodes", e.Nodes)
	}
	return fmt.Sprintf("JetStream, %s, R%d", nodes, e.Replicas)
}

// engine is a running JetStream cluster and an administrative connection
// that creates the streams.
type engine struct {
	cfg     Engine
	cluster *enginetest.NATSCluster
	admin   *nats.Conn
	js      jetstream.JetStream
}

func startEngine(dir string, cfg Engine) (*engine, error) {
	cfg, err := cfg.norm()
	if err != nil {
		return nil, err
	}
	c, err := enginetest.StartNATS(filepath.Join(dir, "engine"), cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("edasplit: starting JetStream: %w", err)
	}
	e := &engine{cfg: cfg, cluster: c}
	if e.admin, err = nats.Connect(c.URLs(), nats.Name("edasplit admin"), connectTimeout); err != nil {
		c.Shutdown()
		return nil, fmt.Errorf("edasplit: %w", err)
	}
	if e.js, err = jetstream.New(e.admin); err != nil {
		e.close()
		return nil, fmt.Errorf("edasplit: %w", err)
	}
	return e, nil
}

// urlsFrom returns the cluster's client URLs starting with node i's: a
// client given them with nats.DontRandomize connects to node i and fails
// over to the others, as each host of a real deployment talks to the node
// nearest to it. Here host A is given node 0 and host B node 1, so that
// in a cluster the bridge crosses nodes as it would between hosts.
func (e *engine) urlsFrom(i int) string {
	n := e.cluster.Nodes()
	urls := make([]string, 0, n)
	for j := range n {
		urls = append(urls, e.cluster.URL((i+j)%n))
	}
	return strings.Join(urls, ",")
}

// createStream creates a file-storage stream with one subject of the same
// name, replicated as configured. (In a cluster the server answers once
// the stream's group is formed and its leader elected.)
func (e *engine) createStream(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{name},
		Storage: jetstream.FileStorage, Replicas: e.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("edasplit: stream %s: %w", name, err)
	}
	return nil
}

// connectTimeout is given to every connection: on a busy 2-core machine
// the client's default (2 s) can pass before an embedded server answers.
var connectTimeout = nats.Timeout(20 * time.Second)

func (e *engine) close() {
	if e.admin != nil {
		e.admin.Close()
	}
	e.cluster.Shutdown()
}
