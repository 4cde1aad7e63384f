package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offmap/offmap/internal/cliargs"
)

// onTerminal runs offmap with stderr on a terminal (and stdout too if
// stdoutTTY) and returns what the terminal showed.
func onTerminal(t *testing.T, stdoutTTY bool, args ...string) string {
	t.Helper()
	master, tty := openPTY(t)
	screen := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO once no process has the tty open
		screen <- b
	}()
	cmd := exec.Command(offmapBin, args...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if stdoutTTY {
		cmd.Stdout = tty
	}
	err := cmd.Run()
	tty.Close()
	out := string(<-screen)
	if err != nil {
		t.Fatalf("offmap %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestProgress: long operations draw a progress bar when stderr is a
// terminal, and stay quiet when it is not (every other test checks that
// stderr stays empty) or with --quiet.
func TestProgress(t *testing.T) {
	src := newMap(t, 2000, 8, 16)
	fill(t, src, sampleEntries(1000))
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.txt")
	if err := os.WriteFile(dump, []byte(ok(t, "dump", src)), 0o600); err != nil {
		t.Fatal(err)
	}
	size := fmt.Sprint(cliargs.FormatSize(fileSizeOf(t, dump)))
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"dump", src}, []string{"\rdump [", "] 100%  1000/1000 entries"}},
		{[]string{"load", filepath.Join(dir, "loaded.map"), dump}, []string{"\rload [", "] 100%  " + size + "/" + size}},
		{[]string{"copy", src, filepath.Join(dir, "copy.map")}, []string{"\rcopy [", "] 100%  1000/1000 entries"}},
		{[]string{"verify", src}, []string{"\rverify [", "16/16 segments"}},
	} {
		screen := onTerminal(t, false, c.args...)
		for _, w := range c.want {
			if !strings.Contains(screen, w) {
				t.Errorf("offmap %s: the terminal lacks %q:\n%q", c.args[0], w, screen)
			}
		}
		if !strings.HasSuffix(screen, "\x1b[K\r\n") {
			t.Errorf("offmap %s: the bar's line is not ended:\n%q", c.args[0], screen)
		}
		for _, line := range strings.Split(screen, "\r") {
			if len(strings.TrimSuffix(line, "\x1b[K\n")) > 99 {
				t.Errorf("offmap %s: a line wider than the terminal: %q", c.args[0], line)
			}
		}
	}
	if screen := onTerminal(t, false, "dump", "--quiet", src); screen != "" {
		t.Errorf("dump --quiet drew %q", screen)
	}
	// Entries printed on the terminal get no bar between them.
	if screen := onTerminal(t, true, "dump", src); strings.Contains(screen, "\rdump") || !strings.Contains(screen, `"key-0999"`) {
		t.Errorf("dump to the terminal: %q", screen)
	}
}

func fileSizeOf(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
