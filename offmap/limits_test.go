package offmap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/offmap/offmap/internal/reexec"
)

func init() {
	// reserve-limited lowers its address-space limit to 1 GiB above what
	// it uses, then opens a map of the default 64 GiB MaxFileSize, which
	// cannot fit, and one of 16 MiB, which must. It prints the error.
	children["reserve-limited"] = func() error {
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return err
		}
		var used uint64
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmSize:" {
				kb, err := strconv.ParseUint(f[1], 10, 64)
				if err != nil {
					return err
				}
				used = kb << 10
			}
		}
		if used == 0 {
			return errors.New("no VmSize in /proc/self/status")
		}
		limit := used + 1<<30
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			return err
		}
		dir := os.Getenv("DIR")
		opts := Options{Entries: 1000, AverageKeySize: 8, AverageValueSize: 8, MaxFileSize: 64 << 30}
		if m, err := Open(filepath.Join(dir, "big.map"), opts); err == nil {
			// The limit binds something else: an emulator's own address
			// space, say.
			m.Close()
			fmt.Println("unenforced")
			return nil
		} else {
			fmt.Printf("limit %d\n%v\n", limit, err)
		}
		opts.MaxFileSize = 16 << 20
		m, err := Open(filepath.Join(dir, "small.map"), opts)
		if err != nil {
			return fmt.Errorf("a 16 MiB map under the limit: %w", err)
		}
		return m.Close()
	}
}

// TestReserveErrorSaysWhatToChange: under an address-space limit that a
// map's MaxFileSize does not fit, Open's error names MaxFileSize, the
// size and the limit, and says what to change; a map created with a
// smaller MaxFileSize opens.
func TestReserveErrorSaysWhatToChange(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	if reexec.Emulated() {
		// A user-mode emulator maps the program's address space inside
		// its own: the limit applies to the emulator, not to the map.
		t.Skip("address-space limits are the emulator's under emulation")
	}
	cmd := child(t, "reserve-limited", "DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if string(out) == "unenforced\n" {
		t.Skip("a 64 GiB reservation fit under the lowered limit: the limit is not enforced here")
	}
	lines := strings.SplitN(string(out), "\n", 2)
	limit, ok := strings.CutPrefix(lines[0], "limit ")
	if !ok || len(lines) < 2 {
		t.Fatalf("child printed %q", out)
	}
	msg := lines[1]
	for _, want := range []string{"Options.MaxFileSize", "68719476736 bytes", "ulimit -v) is " + limit + " bytes", "offmap copy --max-file-size", "cannot allocate memory"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
}
