// Package enginetest starts the engines the replication tests and
// benchmarks run against, in the calling process, on loopback: a NATS
// JetStream cluster of embedded servers with file storage, and a kfake
// Kafka cluster. Client processes (the mirror, ingest and replica
// processes a test starts) connect over TCP as they would to real ones.
package enginetest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
)

// NATSCluster is a JetStream cluster of embedded nats-servers on
// 127.0.0.1. Each node keeps its ports and store directory across Stop and
// Start, as a restarted server on a host would.
type NATSCluster struct {
	mu    sync.Mutex
	opts  []*server.Options
	nodes []*server.Server // nil while stopped
}

// StartNATS starts a cluster of n JetStream nodes (n = 1 starts a single
// server with no cluster) storing under dir, and waits until JetStream has
// a meta leader.
func StartNATS(dir string, n int) (*NATSCluster, error) {
	if n < 1 {
		return nil, errors.New("enginetest: a cluster needs a node")
	}
	clientPorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routePorts, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	c := &NATSCluster{opts: make([]*server.Options, n), nodes: make([]*server.Server, n)}
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1", Port: clientPorts[i],
			NoLog: true, NoSigs: true,
			JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			DisableJetStreamBanner: true,
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: "offmap", Host: "127.0.0.1", Port: routePorts[i]}
			for j := range n {
				if j != i {
					o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", routePorts[j])})
				}
			}
		}
		c.opts[i] = o
	}
	for i := range n {
		if err := c.Start(i); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// Nodes is the number of nodes, running or not.
func (c *NATSCluster) Nodes() int { return len(c.opts) }

// URLs is the comma-separated client URLs of every node, the form
// nats.Connect takes.
func (c *NATSCluster) URLs() string {
	s := ""
	for i, o := range c.opts {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return s
}

// URL is node i's client URL.
func (c *NATSCluster) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port) }

// Server is node i's server, nil while it is stopped.
func (c *NATSCluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Start starts node i (again) with its ports and store.
func (c *NATSCluster) Start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i] != nil {
		return nil
	}
	o := *c.opts[i]
	o.Routes = append([]*url.URL(nil), c.opts[i].Routes...)
	s, err := server.NewServer(&o)
	if err != nil {
		return fmt.Errorf("enginetest: node %d: %w", i+1, err)
	}
	s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("enginetest: node %d did not start", i+1)
	}
	c.nodes[i] = s
	return nil
}

// Stop shuts node i down, as a crashed or stopped server: its clients
// reconnect to the others.
func (c *NATSCluster) Stop(i int) {
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// running counts the nodes not stopped; c.mu is held.
func (c *NATSCluster) running() int {
	n := 0
	for _, s := range c.nodes {
		if s != nil {
			n++
		}
	}
	return n
}

// Shutdown stops every node.
func (c *NATSCluster) Shutdown() {
	for i := range c.opts {
		c.Stop(i)
	}
}

// WaitReady waits until every running node has JetStream enabled and, in
// a cluster, a meta leader is elected and every running node knows it.
func (c *NATSCluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ready := true
		leaders := 0
		c.mu.Lock()
		for _, s := range c.nodes {
			if s == nil {
				continue
			}
			if !s.JetStreamEnabled() {
				ready = false
			}
			if len(c.opts) > 1 {
				if s.JetStreamIsLeader() {
					leaders++
					// The leader knows every running node as a peer: a
					// replicated stream can be placed.
					if len(s.JetStreamClusterPeers()) < c.running() {
						ready = false
					}
				}
				if !s.JetStreamIsCurrent() {
					ready = false
				}
			}
		}
		c.mu.Unlock()
		if ready && (len(c.opts) == 1 || leaders == 1) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("enginetest: JetStream cluster not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartKafka starts a kfake cluster of brokers storing under dir (empty:
// in memory). Seeds are its broker addresses.
func StartKafka(dir string, brokers int, opts ...kfake.Opt) (*kfake.Cluster, error) {
	all := []kfake.Opt{kfake.NumBrokers(brokers)}
	if dir != "" {
		all = append(all, kfake.DataDir(dir))
	}
	return kfake.NewCluster(append(all, opts...)...)
}

// freePorts picks n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// NATSForTest starts a cluster of n nodes under the test's temporary
// directory, and a client connection that reconnects without end; both
// are closed when the test ends.
func NATSForTest(t testing.TB, n int) (*NATSCluster, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	c, err := StartNATS(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c, nc, js
}
