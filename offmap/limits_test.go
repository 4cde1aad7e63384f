//go:build unix

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

// TestTenThousandDefaultMaps: one process opens 10,000 small maps made
// with the default MaxFileSize and keeps them all open. At the old
// default, 64 GiB of address space each, Open failed near 2,000.
func TestTenThousandDefaultMaps(t *testing.T) {
	const n = 10_000
	switch {
	case testing.Short():
		t.Skip("creates 10,000 map files")
	case raceEnabled:
		t.Skip("the race detector's shadow memory leaves a process a few TiB of address space")
	case reexec.Emulated():
		t.Skip("qemu-user keeps a descriptor per reserved page")
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < n+1000 {
		t.Skipf("needs %d open files (ulimit -n is %d)", n+1000, rl.Cur)
	}
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v < 4*n {
			t.Skipf("needs vm.max_map_count of %d (it is %d)", 4*n, v)
		}
	}
	// On tmpfs where there is one: creating a map syncs it, and 10,000
	// syncs on a disk take most of a minute.
	dir := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "offmap-maps-"); err == nil {
			dir = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	maps := make([]*Map, 0, n)
	t.Cleanup(func() {
		for _, m := range maps {
			m.Close()
		}
	})
	for i := range n {
		m, err := Open(filepath.Join(dir, fmt.Sprintf("%05d.map", i)), Options{Entries: 64})
		if err != nil {
			t.Fatalf("map %d: %v", i, err)
		}
		maps = append(maps, m)
		if err := m.Put([]byte("k"), []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("map %d: %v", i, err)
		}
	}
	if got := maps[0].Stats().MaxFileSize; got != 1<<30 {
		t.Errorf("a small map's default MaxFileSize is %d, want 1 GiB", got)
	}
	for i, m := range maps {
		if v, err := m.Get([]byte("k")); err != nil || string(v) != strconv.Itoa(i) {
			t.Fatalf("map %d: Get = %q, %v", i, v, err)
		}
	}
}
