package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/offmap/offmap/offmap"
)

var verifyCommand = command{
	name:     "verify",
	synopsis: "[--quiet] FILE",
	summary:  "check a map's consistency (exit 1 when damaged)",
	help: `Verify checks the whole file: the header (magic, version, checksum,
geometry, reserved bytes, file size), then every segment: each entry lies
inside its segment, hashes to its slot and is reachable from it; no two
slots share an entry and no entries overlap; no chunk is leaked or marked
free while used; the counts agree with the slots; no lock is held by a
dead process and no write or in-place update was left half done.

It exits 0 when the map is sound, and 1 with one line per problem
otherwise; each line says what 'offmap recover' would do about it. A file
that is empty, foreign, truncated, of an unknown version or with a
damaged header gets a one-line error and status 1. Verify opens the file
read-only and repairs nothing, so it reports what a crashed process left
behind; it may run while other processes use the map. On a terminal,
stderr shows its progress.`,
	examples: `  offmap verify clients.map
  # in a script
  offmap verify clients.map || offmap recover clients.map`,
	run: runVerify,
}

func runVerify(c *cli, args []string) error {
	fs := c.flags()
	quiet := fs.Bool("quiet", false, "no progress indicator")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	path := pos[0]
	if err := mustExist(path); err != nil {
		return err
	}
	m, err := offmap.Open(path, readOnly)
	if isFileDamage(err) {
		return negative(err)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	st := m.Stats()
	problems, err := check(m, c.newProgress(*quiet, 0, ""))
	if err != nil {
		return err
	}
	raw, oddSegments, err := rawProblems(path, st)
	if err != nil {
		return err
	}
	// A read-only Check cannot tell a segment left odd by damage from one
	// that writers keep changing; rawProblems can.
	problems = slices.DeleteFunc(problems, func(p string) bool {
		return slices.ContainsFunc(oddSegments, func(i int) bool { return p == fmt.Sprintf("segment %d: kept changing while checked", i) })
	})
	problems = append(raw, problems...)
	if len(problems) == 0 {
		fmt.Fprintf(c.stdout, "%s: ok: %d entries in %d segments\n", path, st.Len, st.Segments)
		return nil
	}
	fmt.Fprintf(c.stdout, "%s: %d problems:\n", path, len(problems))
	for _, p := range problems {
		fmt.Fprintf(c.stdout, "  %s\n", p)
	}
	if len(problems) > len(raw) || len(oddSegments) > 0 {
		fmt.Fprintf(c.stdout, "'offmap recover %s' repairs the segments as each line describes.\n", path)
	}
	return &exitErr{code: exitNegative, silent: true, err: errors.New("damaged")}
}

// check runs m.Check, moving the progress spinner meanwhile. (Check is one
// call over every segment: the spinner shows activity, not a fraction.)
func check(m *offmap.Map, p *progress) ([]string, error) {
	done := make(chan error, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- errors.New(panicMessage(r))
			}
		}()
		done <- m.Check()
	}()
	tick := time.NewTicker(redrawEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			p.Done()
			var ce *offmap.CheckError
			if errors.As(err, &ce) {
				return ce.Problems, nil
			}
			return nil, err
		case <-tick.C:
			p.Tick()
		}
	}
}

// rawProblems checks what offmap.Open and Check leave out: the header's
// reserved bytes, the file's exact size, and segments whose version is odd
// while no process holds their lock (only damage or a cut-off repair
// leaves that). It returns the problems and the odd segments.
func rawProblems(path string, st offmap.Stats) ([]string, []int, error) {
	var problems []string
	const rewrite = " (recover cannot fix this; 'offmap copy' rewrites the file)"
	h, segs, err := rawState(path)
	if err != nil {
		return nil, nil, err
	}
	if off := h.reservedNonZero(); off >= 0 {
		problems = append(problems, fmt.Sprintf("header: reserved byte at offset %d is not zero%s", off, rewrite))
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() != st.FileSize {
		problems = append(problems, fmt.Sprintf("file is %d bytes, its header says %d%s", fi.Size(), st.FileSize, rewrite))
	}
	odd, err := oddUnlocked(path, segs)
	for _, i := range odd {
		problems = append(problems, fmt.Sprintf("segment %d: version is odd but no process holds the lock (a write was cut off)", i))
	}
	return problems, odd, err
}

// oddUnlocked returns the segments whose version is odd while their lock
// is free, in segs and again in a second reading: a writer that came and
// went between the two would have changed the version.
func oddUnlocked(path string, segs []rawSegment) ([]int, error) {
	_, again, err := rawState(path)
	if err != nil {
		return nil, err
	}
	var odd []int
	for i, s := range segs {
		if s.version&1 != 0 && s.owner == 0 && again[i] == s {
			odd = append(odd, i)
		}
	}
	return odd, nil
}
