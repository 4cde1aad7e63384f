package offmap

import (
	"errors"

	"golang.org/x/sys/unix"
)

func isReadOnlyFS(err error) bool { return errors.Is(err, unix.EROFS) }
