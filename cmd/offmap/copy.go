package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/offmap/offmap/internal/cliargs"
	"github.com/offmap/offmap/offmap"
)

var copyCommand = command{
	name:     "copy",
	synopsis: "[size flags] [--mode BITS] [--quiet] SRC DST",
	summary:  "copy every entry into a new, compact map, re-shaped if asked",
	help: `Copy writes a new map file DST holding every entry of SRC, compactly:
DST has none of the space SRC's growth left unused ('unused' in 'offmap
stat') and starts with the room it needs. It also re-shapes a map: DST
takes SRC's layout, with the size flags given replacing it (with a new
--entries, the segment count and the maximum file size are chosen afresh
unless --segments or --max-file-size is given), and SRC's file permission
unless --mode is given. A map grows as it fills, so DST may be declared
for fewer entries than it receives; copy fails only when DST would grow
past its --max-file-size, or an entry is over its --max-key or
--max-value.

DST must not exist; it appears only when complete, so a failed or
interrupted copy leaves nothing behind. SRC is opened read-only; copying a
map in use copies each segment as it was at one instant. On a terminal,
stderr shows a progress bar.`,
	examples: `  # a compact copy of a map that grew a lot: it starts at its present size
  offmap copy --entries 2000000 clients.map clients-2m.map
  # larger values from now on
  offmap copy --avg-value 64 --max-value 4096 clients.map clients-big.map
  # a map that may grow to 1 GiB at most
  offmap copy --max-file-size 1GiB clients.map clients-capped.map`,
	run: runCopy,
}

func runCopy(c *cli, args []string) error {
	fs := c.flags()
	var l layout
	l.define(fs)
	quiet := fs.Bool("quiet", false, "no progress bar")
	pos, err := c.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	if err := l.check(c, fs); err != nil {
		return err
	}
	srcPath, dstPath := pos[0], pos[1]
	if _, err := os.Lstat(dstPath); err == nil {
		return fmt.Errorf("%s already exists", dstPath)
	}
	src, err := openMap(srcPath, readOnly)
	if err != nil {
		return err
	}
	defer src.Close()
	st := src.Stats()
	from := layoutOf(st)
	if l.entries != 0 {
		from.segments, from.maxFileSize = 0, 0 // sized afresh for the new capacity
	}
	l.fill(from)
	modeSet := false
	fs.Visit(func(f *flag.Flag) { modeSet = modeSet || f.Name == "mode" })
	if fi, err := os.Stat(srcPath); err == nil && !modeSet {
		l.mode = octalMode(fi.Mode().Perm())
	}

	// Build the copy under a temporary name in DST's directory, and link
	// it at DST only when complete.
	tmp := filepath.Join(filepath.Dir(dstPath), fmt.Sprintf(".%s.copy-%d", filepath.Base(dstPath), os.Getpid()))
	dst, err := createMap(tmp, l)
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(stop)
	go func() {
		if _, ok := <-stop; ok {
			os.Remove(tmp)
			os.Exit(130)
		}
	}()
	n, err := copyEntries(c, src, dst, int64(st.Len), *quiet)
	out := dst.Stats()
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, dstPath)
	}
	os.Remove(tmp)
	switch {
	case errors.Is(err, offmap.ErrFull):
		return fmt.Errorf("%s is too small after %d of %d entries: %w; give a larger --max-file-size (or --entries or --avg-* sizes)", dstPath, n, st.Len, err)
	case errors.Is(err, offmap.ErrKeyTooLarge), errors.Is(err, offmap.ErrValueTooLarge):
		return fmt.Errorf("%w; give a larger --max-key or --max-value", err)
	case err != nil:
		return err
	}
	if out.Evict {
		// A cache smaller than the source keeps what it can: say so.
		fmt.Fprintf(c.stdout, "copied %d entries from %s to %s: a cache of at most %d entries, %d segments, %s; it holds %d (%d evicted)\n",
			n, srcPath, dstPath, out.EvictBound, out.Segments, cliargs.FormatSize(out.FileSize), out.Len, out.Evictions)
		return nil
	}
	fmt.Fprintf(c.stdout, "copied %d entries from %s to %s: room for %d entries to start, %d segments, %s\n",
		n, srcPath, dstPath, out.Capacity, out.Segments, cliargs.FormatSize(out.FileSize))
	return nil
}

// copyEntries puts every entry of src into dst and returns how many.
func copyEntries(c *cli, src, dst *offmap.Map, total int64, quiet bool) (int64, error) {
	p := c.newProgress(quiet, total, "entries")
	defer p.Done()
	var n int64
	var perr error
	err := src.Range(func(k, v []byte) bool {
		if perr = dst.Put(k, v); perr != nil {
			return false
		}
		n++
		p.Add(1)
		return true
	})
	if err == nil {
		err = perr
	}
	return n, err
}
