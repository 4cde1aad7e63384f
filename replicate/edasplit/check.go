package edasplit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/offmap/offmap/bench/eda"
)

// ExactlyOnce checks a run of the split chain end to end: every message
// the plan sent reached the receiver once and intact, every service's
// counter equals the messages it handled (eda.Result.OK: a message
// carried twice counts twice, one lost counts nowhere), and on each
// bridge the four stages agree: appended on host A, acknowledged
// by the engine, ingested on host B, read by the services 3. The consumer has
// already checked the engine's sequences as it read (a gap or a repeat
// fails the run). stats may be nil for a transport with no bridge.
//
// It is the test's verdict and the command's "exactly once" column, so
// that the two cannot disagree on what a faithful bridge is.
func ExactlyOnce(r *eda.Result, stats []BridgeStats) error {
	var errs []string
	if r.Delivered != r.Sent {
		errs = append(errs, fmt.Sprintf("sent %d, delivered %d", r.Sent, r.Delivered))
	}
	if r.Bad != 0 {
		errs = append(errs, fmt.Sprintf("%d malformed or miscounted messages", r.Bad))
	}
	if n := len(r.CounterErrors); n > 0 {
		errs = append(errs, fmt.Sprintf("%d counter errors, first: %s", n, r.CounterErrors[0]))
	}
	var produced int64
	for _, s := range stats {
		produced += s.Produced
		if uint64(s.Produced) != s.Acked || s.Acked != s.Ingested || s.Ingested != uint64(s.Consumed) {
			errs = append(errs, fmt.Sprintf("stream %s: appended on A %d, acknowledged by the engine %d, ingested on B %d, read %d",
				s.Stream, s.Produced, s.Acked, s.Ingested, s.Consumed))
		}
	}
	if stats != nil && produced != r.Sent {
		errs = append(errs, fmt.Sprintf("bridged topics carried %d messages, the plan sent %d", produced, r.Sent))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New("edasplit: not exactly once: " + strings.Join(errs, "; "))
}
