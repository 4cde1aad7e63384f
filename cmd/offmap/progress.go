package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/offmap/offmap/internal/cliargs"
)

// progress draws a one-line progress bar on a terminal: a bar when the
// total is known, a count and a spinner when it is not. A nil *progress
// draws nothing, so that commands need no test before each call. Its
// methods are for one goroutine.
type progress struct {
	w      io.Writer
	width  int    // terminal columns
	bar    int    // bar columns, fixed so that the line does not shift
	label  string // the command
	unit   string // "entries", "bytes" or "segments"
	total  int64  // 0: unknown
	done   int64
	calls  int
	start  time.Time
	redraw time.Time // earliest next redraw
	spin   int
}

// redrawEvery limits redraws to a rate a person can read.
const redrawEvery = 100 * time.Millisecond

// newProgress returns a progress bar on stderr if stderr is a terminal
// and quiet is false, otherwise nil. total is 0 when unknown; unit is
// "bytes", a plural noun, or "" for work that cannot be counted.
func (c *cli) newProgress(quiet bool, total int64, unit string) *progress {
	if quiet || !c.stderrTTY {
		return nil
	}
	width := 80
	if f, ok := c.stderr.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 20 {
			width = w
		}
	}
	p := &progress{w: c.stderr, width: width, label: c.cmd.name, unit: unit, total: total, start: time.Now()}
	// Room for the label, the percentage, "done/total unit" and the time.
	p.bar = min(40, width-len(p.label)-len(p.fraction(total))-len(" [] 100%    12m34.5s")-1)
	p.draw(false)
	return p
}

// Add counts n more units done.
func (p *progress) Add(n int64) {
	if p == nil {
		return
	}
	p.done += n
	if p.calls++; p.calls&255 != 0 {
		return
	}
	p.Tick()
}

// Set sets the units done so far.
func (p *progress) Set(n int64) {
	if p == nil {
		return
	}
	p.Add(n - p.done)
}

// Tick redraws the line if it is due; for work whose amount is unknown,
// a goroutine-free caller calls it periodically to move the spinner.
func (p *progress) Tick() {
	if p == nil {
		return
	}
	if now := time.Now(); now.After(p.redraw) {
		p.redraw = now.Add(redrawEvery)
		p.spin++
		p.draw(false)
	}
}

// Done draws the final state and ends the line.
func (p *progress) Done() {
	if p == nil {
		return
	}
	p.draw(true)
}

func (p *progress) draw(final bool) {
	elapsed := time.Since(p.start).Round(100 * time.Millisecond)
	var line string
	if p.total > 0 {
		pct := min(100, int(100*p.done/p.total))
		bar := ""
		if p.bar >= 10 {
			full := p.bar * pct / 100
			bar = " [" + strings.Repeat("=", full) + strings.Repeat(" ", p.bar-full) + "]"
		}
		line = fmt.Sprintf("%s%s %3d%%  %s  %s", p.label, bar, pct, p.fraction(p.done), elapsed)
	} else {
		spinner := string(`|/-\`[p.spin%4])
		if final {
			spinner = "done"
		}
		count := fmt.Sprintf("  %d %s", p.done, p.unit)
		switch p.unit {
		case "bytes":
			count = "  " + cliargs.FormatSize(p.done)
		case "":
			count = ""
		}
		line = fmt.Sprintf("%s %s%s  %s", p.label, spinner, count, elapsed)
	}
	if len(line) >= p.width {
		line = line[:p.width-1]
	}
	end := "\x1b[K"
	if final {
		end += "\n"
	}
	fmt.Fprint(p.w, "\r"+line+end)
}

// fraction is "done/total unit".
func (p *progress) fraction(done int64) string {
	if p.unit == "bytes" {
		return cliargs.FormatSize(done) + "/" + cliargs.FormatSize(p.total)
	}
	return fmt.Sprintf("%d/%d %s", done, p.total, p.unit)
}
