package main

import (
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// natsDialer dials the NATS servers as nats.go does and keeps the outcome
// of the last attempt, which nats.go does not report (it turns a refused
// connection into "no servers available"), so that a job can say what it
// waits for and why.
type natsDialer struct {
	urls string
	d    net.Dialer
	mu   sync.Mutex
	err  error // of the last dial; nil after one that succeeded
}

func newNATSDialer(urls string) *natsDialer {
	return &natsDialer{urls: urls, d: net.Dialer{Timeout: nats.DefaultTimeout}}
}

func (n *natsDialer) Dial(network, address string) (net.Conn, error) {
	c, err := n.d.Dial(network, address)
	n.mu.Lock()
	n.err = err
	n.mu.Unlock()
	return c, err
}

// waiting says what the job waits for while the last dial failed, and
// why: "waiting for NATS at nats://a:4222: dial tcp ...: connection
// refused"; "" when it succeeded, or for a job with no NATS servers.
func (n *natsDialer) waiting() string {
	if n == nil {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err == nil {
		return ""
	}
	return fmt.Sprintf("waiting for NATS at %s: %v", n.urls, n.err)
}

// withWaiting adds to a progress or error line what the job waits for,
// if anything.
func (n *natsDialer) withWaiting(line string) string {
	if w := n.waiting(); w != "" && !strings.Contains(line, w) {
		return line + "; " + w
	}
	return line
}

// libraryPrefixes are the prefixes the packages offrepl runs put on their
// errors; the command's name already says where an error comes from.
var libraryPrefixes = []string{"ingest: ", "replica: ", "mirror: ", "queue: ", "offmap: "}

// flagNames are the Config fields the packages' errors name, as the
// flags a user of offrepl types.
var flagNames = strings.NewReplacer(
	"Config.TakeOver", "--take-over",
	"Config.Resync", "--resync",
	"Config.AllowGaps", "--allow-gaps",
)

// message is s as offrepl prints it after "offrepl: COMMAND: " or in a
// progress line: one line, without the packages' own prefixes (at the
// start, or after ": ") and naming flags rather than Config fields.
func message(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
	for changed := true; changed; {
		changed = false
		for _, p := range libraryPrefixes {
			if t, ok := strings.CutPrefix(s, p); ok {
				s, changed = t, true
			}
			if strings.Contains(s, ": "+p) {
				s, changed = strings.ReplaceAll(s, ": "+p, ": "), true
			}
		}
	}
	return flagNames.Replace(s)
}
