// Package good speaks plain English of its cycle, its segment and its
// header, e.g. a cycle file, i.e. a file; docs/FORMAT.md has the layout,
// and Thing.Size the size. It names the Go version 1.26 and go.mod.
package good

// Thing holds a cycle. Use Thing.Wait (or Wait()) to wait for the segment.
type Thing struct {
	// Size is the header's size.
	Size    int
	segment int
}

// Wait waits for the cycle to end (a cycle (of files) and its header).
func (t *Thing) Wait() {}

type cycle struct{}

func (c *cycle) header() {}

var segment = 0
