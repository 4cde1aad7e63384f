package eda

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// role is what one process of a run serves.
type role struct {
	Instances []int `json:"instances"`
	Senders   bool  `json:"senders"`   // releases their sends
	Services  []int `json:"services"`  // runs these services (1..5) for them
	Receivers bool  `json:"receivers"` // runs their receivers
}

func allInstances(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// topics returns the topics a role produces and consumes.
func (r role) topics() (outs, ins []int) {
	if r.Senders {
		outs = append(outs, 0)
	}
	for _, s := range r.Services {
		ins = append(ins, s-1)
		outs = append(outs, s)
	}
	if r.Receivers {
		ins = append(ins, Services)
	}
	return outs, ins
}

// server is a role being served in this process.
type server struct {
	c    *chain
	r    role
	cfg  Config
	ins  []int
	errs chan error
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// open opens the topics and counters of role r.
func open(c *chain, t Transport, seed uint32, r role) (*server, error) {
	outs, ins := r.topics()
	for _, i := range r.Instances {
		in, err := c.open(t, seed, i, outs, ins, r.Services)
		if err != nil {
			return nil, err
		}
		c.instances = append(c.instances, in)
	}
	return &server{c: c, r: r, ins: ins, errs: make(chan error, 64)}, nil
}

// start serves the role from now on; c.plan must be final.
func (s *server) start(cfg Config) error {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	c := s.c
	if cfg.Wait == Loop {
		loops, err := s.loops(cfg.Workers, cfg.Batch)
		if err != nil {
			cancel()
			return err
		}
		for _, l := range loops {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer l.close()
				if cfg.PinLoops {
					// The thread ends with the goroutine (still locked), so
					// no other goroutine inherits its binding.
					if err := pinThread(cfg.pinFrom + l.shard); err != nil {
						s.errs <- fmt.Errorf("eda: pinning event loop %d: %w", l.shard, err)
						return
					}
				}
				if err := l.run(ctx); err != nil {
					s.errs <- err
				}
			}()
		}
		return nil
	}
	if s.r.Senders {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := c.pacer(ctx, c.instances, cfg.Batch); err != nil {
				s.errs <- err
			}
		}()
	}
	for _, in := range c.instances {
		for _, k := range s.ins {
			c.consume(ctx, &s.wg, s.errs, cfg.Wait, in, k)
		}
	}
	return nil
}

// loops builds the event loops that serve the role: workers of them, or
// one per instance when there are fewer instances.
func (s *server) loops(workers int, batch time.Duration) ([]*loop, error) {
	c := s.c
	loops := make([]*loop, min(workers, len(c.instances)))
	for w := range loops {
		loops[w] = newLoop(c, w, batch)
	}
	// A loop that sends, serves every service and receives sees no
	// message it did not produce itself: it follows each down the
	// chain instead of waiting for topics.
	closed := s.r.Senders && s.r.Receivers && len(s.r.Services) == Services
	// Each loop takes a contiguous block of instances, not every n-th:
	// an instance's Go structures (tailers, cycles, counters) are
	// allocated beside its neighbours', and loops on different cores
	// writing to neighbours' cache lines cost a third more CPU at 500
	// instances.
	for j, in := range c.instances {
		l := loops[j*len(loops)/len(c.instances)]
		if s.r.Senders {
			l.addSender(in)
		}
		for _, k := range s.ins {
			if err := l.addConsumer(in, k, !closed); err != nil {
				return nil, err
			}
		}
	}
	for _, l := range loops {
		l.formGroups()
	}
	shareGroups(loops)
	return loops, nil
}

// halt stops serving and returns the first error any goroutine met.
func (s *server) halt() error {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	select {
	case err := <-s.errs:
		return err
	default:
		return nil
	}
}

// failed returns an error a serving goroutine met, if any, without
// stopping.
func (s *server) failed() error {
	select {
	case err := <-s.errs:
		s.errs <- err
		return err
	default:
		return nil
	}
}

// received is how many messages this process's receivers got.
func (c *chain) received() int64 {
	var n int64
	for _, in := range c.instances {
		n += in.received.Load()
	}
	return n
}

// waitDelivered waits until this process's receivers have every message
// of the plan, or until deadline; it returns how many are missing.
func (c *chain) waitDelivered(deadline time.Time) int64 {
	var want int64
	for _, in := range c.instances {
		want += c.plan.sends(in.id)
	}
	for c.received() < want && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	return want - c.received()
}
