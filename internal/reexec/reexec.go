// Package reexec starts the running binary again, as the multi-process
// tests do for their helper processes. When the tests run under a
// user-mode emulator (CI runs the linux/arm64 test binaries with
// qemu-aarch64 on amd64) and the kernel does not run foreign binaries on
// its own (no binfmt_misc entry), the helper must be started through the
// emulator too: the environment variable OFFMAP_TEST_EMULATOR names it,
// and it is inherited by the helpers, so that they can start their own.
package reexec

import (
	"os"
	"os/exec"
)

// EmulatorEnv is the environment variable that names the emulator.
const EmulatorEnv = "OFFMAP_TEST_EMULATOR"

// Command returns a command that runs this binary (os.Args[0]) with args,
// through the emulator when OFFMAP_TEST_EMULATOR is set.
func Command(args ...string) *exec.Cmd {
	if emu := os.Getenv(EmulatorEnv); emu != "" {
		return exec.Command(emu, append([]string{os.Args[0]}, args...)...)
	}
	return exec.Command(os.Args[0], args...)
}

// Emulated reports whether this binary runs under an emulator.
func Emulated() bool { return os.Getenv(EmulatorEnv) != "" }

// Die ends this process at once, as kill -9 does: no deferred call or
// exit handler runs (SIGKILL on Unix, TerminateProcess on Windows, which
// neither returns).
func Die() {
	p, _ := os.FindProcess(os.Getpid())
	p.Kill()
}
