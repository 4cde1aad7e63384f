//go:build !amd64

package shm

func prefetch(uintptr) {}

func prefetchWrite(uintptr) {}
