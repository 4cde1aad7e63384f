package offmap

import (
	"testing"

	"github.com/offmap/offmap/internal/doccheck"
)

// TestDocNamesNoInternals keeps go doc to what a caller can use: no
// unexported identifier, internal package or source file name.
func TestDocNamesNoInternals(t *testing.T) { doccheck.Test(t, ".") }
