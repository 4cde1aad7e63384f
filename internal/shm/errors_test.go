package shm

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestOpErrorNamesPackageAndPathOnce(t *testing.T) {
	conflict := errors.New("offmap: options conflict with the existing file")
	_, statErr := os.Open("/nonexistent/data.map")
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: Entries 5, the file's 10", conflict), "offmap: open data.map: options conflict with the existing file: Entries 5, the file's 10"},
		{statErr, "offmap: open /nonexistent/data.map: " + errors.Unwrap(statErr).Error()},
		{fmt.Errorf("%w: wrong magic number", ErrForeign), "offmap: open data.map: not a file of this kind: wrong magic number"},
		{fmt.Errorf("%w: data.map is not a regular file", ErrForeign), "offmap: not a file of this kind: data.map is not a regular file"},
	} {
		path := "data.map"
		var pe *os.PathError
		if errors.As(c.err, &pe) {
			path = pe.Path
		}
		e := &OpError{Pkg: "offmap", Op: "open", Path: path, Err: c.err}
		if e.Error() != c.want {
			t.Errorf("%q, want %q", e.Error(), c.want)
		}
		if !errors.Is(e, c.err) {
			t.Errorf("%v does not wrap %v", e, c.err)
		}
	}
}
