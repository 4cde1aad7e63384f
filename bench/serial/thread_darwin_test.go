package serial

import "testing"

// threadCPU: macOS has no RUSAGE_THREAD; the metric is left out.
func threadCPU(*testing.B) int64 { return -1 }
