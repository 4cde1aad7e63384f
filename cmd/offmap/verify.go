package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/offmap/offmap/internal/cliargs"
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
	m, err := offmap.Open(path, offmap.Options{ReadOnly: true, OpenDamaged: true})
	if isFileDamage(err) {
		return negative(err)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	st := m.Stats()
	problems, err := check(m, st.Segments, c.newProgress(*quiet, int64(st.Segments), "segments"))
	if err != nil {
		return err
	}
	raw, err := m.CheckFile()
	if err != nil {
		return err
	}
	for i := range raw {
		if !strings.Contains(raw[i], "recover") {
			raw[i] += " (recover cannot fix this; 'offmap copy' rewrites the file)"
		}
	}
	problems = append(raw, problems...)
	if len(problems) == 0 {
		fmt.Fprintf(c.stdout, "%s: ok: %d entries in %d segments\n", path, st.Len, st.Segments)
		return nil
	}
	fmt.Fprintf(c.stdout, "%s: %d problems:\n", path, len(problems))
	for _, p := range problems {
		fmt.Fprintf(c.stdout, "  %s\n", p)
	}
	if len(problems) > len(raw) || slices.ContainsFunc(raw, func(p string) bool { return strings.Contains(p, "recover") }) {
		fmt.Fprintf(c.stdout, "'offmap recover %s' repairs what each line says it does.\n", path)
	}
	return &cliargs.ExitErr{Code: exitNegative, Silent: true, Err: errors.New("damaged")}
}

// check checks every segment, moving the progress bar, and returns the
// problems found. A fault from a file truncated while mapped becomes an
// error, not a crash.
func check(m *offmap.Map, segments int, p *progress) (problems []string, err error) {
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			err = errors.New(panicMessage(r))
		}
	}()
	defer p.Done()
	for i := range segments {
		sp, err := m.CheckSegment(i)
		if err != nil {
			return nil, err
		}
		problems = append(problems, sp...)
		p.Add(1)
	}
	return problems, nil
}
