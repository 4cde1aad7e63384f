//go:build !linux

package serial

import "testing"

// threadCPU: only Linux has RUSAGE_THREAD; the metric is left out.
func threadCPU(*testing.B) int64 { return -1 }
