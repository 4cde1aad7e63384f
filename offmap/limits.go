package offmap

import (
	"errors"
	"fmt"

	"github.com/offmap/offmap/internal/shm"
)

// reserveError explains a failed reservation of address space: the error
// from mmap names neither what the reservation is for nor what to change.
// Every process reserves MaxFileSize bytes for each map it opens, so the
// process's address space (128 TiB on Linux amd64, RLIMIT_AS, ulimit -v)
// bounds how many maps it can have open at once.
func reserveError(maxFileSize uint64, err error) error {
	if errors.Is(err, shm.ErrNoPlaceholders) {
		return err // no limit to raise
	}
	limit := shm.AddressSpaceLimit()
	return fmt.Errorf("%w: every process reserves the map's MaxFileSize, %d bytes, of address space for each map it opens, "+
		"and this one has no room for another (%s; a closed map keeps the pages it mapped, so that stale value handles read zeros): "+
		"create maps with a smaller Options.MaxFileSize ('offmap copy --max-file-size' rewrites one), close maps not in use, or raise the limit",
		err, maxFileSize, limit)
}
