package reexec

import (
	"errors"
	"os"
	"os/exec"
)

// Kill ends p at once, as kill -9 does; Wait then gives an error for
// which Killed is true.
func Kill(p *os.Process) error { return kill(p) }

// Killed reports whether err, from a command's Wait, says that the
// process was ended by Kill or Die, and not that it failed or exited:
// SIGKILL on Unix; on Windows, which has no signals, the exit code
// killedCode that Kill and Die give it.
func Killed(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && killedState(ee.ProcessState)
}

// Die ends this process at once, as kill -9 does: no deferred call or
// exit handler runs.
func Die() {
	p, _ := os.FindProcess(os.Getpid())
	kill(p)
}
