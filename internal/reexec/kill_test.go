package reexec

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	switch os.Getenv("REEXEC_TEST_CHILD") {
	case "exit1":
		os.Exit(1)
	case "die":
		Die()
	case "wait":
		os.Stdin.Read(make([]byte, 1)) // until killed, or stdin closes
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Killed tells a process ended by Kill or Die from one that failed, on
// Windows too, where both are exit codes.
func TestKilled(t *testing.T) {
	run := func(role string, kill bool) error {
		cmd := CommandContext(t.Context(), "-test.run=^$")
		cmd.Env = append(os.Environ(), "REEXEC_TEST_CHILD="+role)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if kill {
			if err := Kill(cmd.Process); err != nil {
				t.Fatal(err)
			}
		}
		return cmd.Wait()
	}
	if err := run("wait", true); !Killed(err) {
		t.Errorf("a process ended by Kill: %v, Killed false", err)
	}
	if err := run("die", false); !Killed(err) {
		t.Errorf("a process ended by Die: %v, Killed false", err)
	}
	if err := run("exit1", false); err == nil || Killed(err) {
		t.Errorf("a process that exited with 1: %v, Killed %v", err, Killed(err))
	}
	if Killed(nil) {
		t.Error("Killed(nil)")
	}
}
