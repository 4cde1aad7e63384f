package offmap

import (
	"strings"
	"testing"

	"github.com/offmap/offmap/internal/doccheck"
)

// TestDocNamesNoInternals keeps go doc to what a caller can use: no
// unexported identifier, internal package or source file name.
func TestDocNamesNoInternals(t *testing.T) {
	problems, err := doccheck.Problems(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("the documentation names what callers cannot see:\n%s", strings.Join(problems, "\n"))
	}
}
