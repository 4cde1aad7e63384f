//go:build linux || darwin

package latency

import "golang.org/x/sys/unix"

func rusage() (self, children int64, err error) {
	var ru unix.Rusage
	if err = unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, err
	}
	self = unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime)
	if err = unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, 0, err
	}
	return self, unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime), nil
}
