package metrics

import (
	"testing"

	"github.com/offmap/offmap/internal/doccheck"
)

// TestDocumentation: the package's documentation names nothing a caller
// cannot see.
func TestDocumentation(t *testing.T) { doccheck.Test(t, ".") }
