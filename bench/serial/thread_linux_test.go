package serial

import (
	"testing"

	"golang.org/x/sys/unix"
)

func threadCPU(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return unix.TimevalToNsec(ru.Utime) + unix.TimevalToNsec(ru.Stime)
}
