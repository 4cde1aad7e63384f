package latency

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper sleeps on a non-blocking timerfd registered with Go's netpoller:
// the goroutine parks, and the expiry wakes epoll with nanosecond
// precision, where a runtime timer would round an idle sleep to 1 ms.
type sleeper struct {
	f   *os.File
	fd  int
	buf [8]byte
	bad bool // no timerfd here: fall back to time.Sleep
}

func (s *sleeper) sleepUntil(t int64) {
	if s.f == nil && !s.bad {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
		if err != nil {
			s.bad = true
		} else {
			s.fd, s.f = fd, os.NewFile(uintptr(fd), "latency-pacer-timerfd")
		}
	}
	if s.bad {
		time.Sleep(time.Duration(t - Nanotime()))
		return
	}
	// An absolute CLOCK_MONOTONIC deadline: the same clock as Nanotime, so
	// no drift between computing the delay and arming. A zero value would
	// disarm the timer, but monotonic times here are never zero.
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(t)}
	if err := unix.TimerfdSettime(s.fd, unix.TFD_TIMER_ABSTIME, &its, nil); err != nil {
		time.Sleep(time.Duration(t - Nanotime()))
		return
	}
	if _, err := s.f.Read(s.buf[:]); err != nil {
		time.Sleep(time.Duration(t - Nanotime()))
	}
}

func (s *sleeper) close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
