//go:build !linux

package latency

import "time"

// sleeper falls back to time.Sleep where there is no timerfd.
type sleeper struct{}

func (s *sleeper) sleepUntil(t int64) { time.Sleep(time.Duration(t - Nanotime())) }
func (s *sleeper) close() error       { return nil }
