package latency

import "errors"

var (
	// ErrOptions: Options are inconsistent or out of range; the message
	// says which field.
	ErrOptions = errors.New("latency: bad options")
	// ErrStarted: Run was called twice, or a probe was added after Run.
	ErrStarted = errors.New("latency: harness already started")
	// ErrMissingSamples: after a run the task had recorded fewer end-to-end
	// samples than it was called, and DrainTimeout passed. The results are
	// still returned; the run's Missing field says how many.
	ErrMissingSamples = errors.New("latency: task recorded fewer end-to-end samples than calls")
	// ErrProcessGone: a process listed for CPU measurement could not be
	// read (it exited, or was reaped, before the window closed).
	ErrProcessGone = errors.New("latency: measured process is gone")
)
