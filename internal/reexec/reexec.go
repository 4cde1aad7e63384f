// Package reexec starts the running binary again, as the multi-process
// tests do for their helper processes. When the tests run under a
// user-mode emulator (CI runs the linux/arm64 test binaries with
// qemu-aarch64 on amd64) and the kernel does not run foreign binaries on
// its own (no binfmt_misc entry), the helper must be started through the
// emulator too: the environment variable OFFMAP_TEST_EMULATOR names it,
// and it is inherited by the helpers, so that they can start their own.
package reexec

import (
	"context"
	"os"
	"os/exec"
)

// EmulatorEnv is the environment variable that names the emulator.
const EmulatorEnv = "OFFMAP_TEST_EMULATOR"

// Command returns a command that runs this binary (os.Args[0]) with args,
// through the emulator when OFFMAP_TEST_EMULATOR is set.
func Command(args ...string) *exec.Cmd { return CommandContext(context.Background(), args...) }

// CommandContext is Command for a process that is killed when ctx is
// done, if it is still running: with a test's Context, no helper outlives
// a test that failed before it could stop them (under Wine such a helper
// also keeps the wineserver, and every later test run, waiting).
func CommandContext(ctx context.Context, args ...string) *exec.Cmd {
	if emu := os.Getenv(EmulatorEnv); emu != "" {
		return exec.CommandContext(ctx, emu, append([]string{os.Args[0]}, args...)...)
	}
	return exec.CommandContext(ctx, os.Args[0], args...)
}

// Emulated reports whether this binary runs under an emulator.
func Emulated() bool { return os.Getenv(EmulatorEnv) != "" }
