// Command record runs offmap's headline benchmarks on the machine at hand
// and writes one dated record of them under docs/results: the machine,
// its kernel and Go, the commit, the load average before each step, every
// command, everything each printed, and every figure of every repetition
// with its minimum, median and maximum, plus the EDA sweeps' charts and
// CPU profiles of the lookups and of the EDA chain past the counts that
// passed, which say where the time goes in targets not met. The
// README's results and the "at a glance" table of docs/BENCHMARKS.md are
// then generated from that record, so that they cannot disagree with it
// or with each other.
//
//	go run ./bench/record           # the whole suite: about 25 minutes on two cores
//	go run ./bench/record -quick    # about 6 minutes: fewer repetitions, one short run per EDA count
//	go run ./bench/record -render   # only regenerate the docs from the latest record
//
// Run it on an otherwise idle machine: it measures the machine as much as
// the code. With -steps it runs only some steps (into a record that says
// so); -docs=false leaves the docs alone.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

var (
	goos, goarch = runtime.GOOS, runtime.GOARCH
	numCPU       = runtime.NumCPU
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func run(args []string, log io.Writer) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(log)
	quick := fs.Bool("quick", false, "a quick record: 3 repetitions, shorter benchmarks, one run of 5 s per EDA count")
	reps := fs.Int("reps", 0, "repetitions of each benchmark (default 5, -quick 3)")
	steps := fs.String("steps", "", "run only these steps, comma-separated (default all: "+stepNames()+")")
	render := fs.Bool("render", false, "write no record; regenerate the docs from the latest one")
	docs := fs.Bool("docs", true, "regenerate README.md and docs/BENCHMARKS.md from the new record")
	root := fs.String("root", "", "the repository (default: found from the working directory)")
	out := fs.String("out", "", "directory of the records (default ROOT/docs/results)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if *root == "" {
		if *root, err = findRoot(); err != nil {
			return err
		}
	}
	if *out == "" {
		*out = filepath.Join(*root, "docs", "results")
	}
	if *render {
		return renderDocs(*root, *out)
	}
	chosen, err := chooseSteps(*steps)
	if err != nil {
		return err
	}
	if *reps <= 0 {
		*reps = 5
		if *quick {
			*reps = 3
		}
	}
	dir, err := record(*root, *out, *quick, *reps, chosen, log)
	if err != nil {
		return err
	}
	fmt.Fprintln(log, "record: wrote", dir)
	if *docs {
		return renderDocs(*root, *out)
	}
	return nil
}

func stepNames() string {
	names := make([]string, len(suite))
	for i, s := range suite {
		names[i] = s.name
	}
	return strings.Join(names, ",")
}

func chooseSteps(list string) ([]stepDef, error) {
	if list == "" {
		return suite, nil
	}
	var chosen []stepDef
	for _, name := range strings.Split(list, ",") {
		found := false
		for _, s := range suite {
			if s.name == name {
				chosen, found = append(chosen, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no step %q (steps: %s)", name, stepNames())
		}
	}
	return chosen, nil
}

// findRoot walks up from the working directory to the main module's go.mod.
func findRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/offmap/offmap\n") {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("not inside the offmap repository (no go.mod of module github.com/offmap/offmap above the working directory)")
		}
		d = parent
	}
}

// record runs the steps and writes the record's directory: record.json,
// README.md, one output file per step and the sweeps' files. A step that
// fails is recorded with its error and the others still run; the command
// then fails, after writing the record.
func record(root, out string, quick bool, reps int, steps []stepDef, log io.Writer) (string, error) {
	start := time.Now()
	name := start.UTC().Format("2006-01-02-1504") + "-record"
	if quick {
		name += "-quick"
	}
	dir, err := filepath.Abs(filepath.Join(out, name))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin, err := os.MkdirTemp("", "offmap-record-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(bin)
	r := &runner{root: root, dir: dir, bin: bin, quick: quick, reps: reps, log: log, built: map[string]string{}}
	replace := []string{bin, "$BIN", dir, "$RECORD"}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		r.shm = "/dev/shm"
		replace = append(replace, r.shm, "$TMPFS")
	}
	r.names = strings.NewReplacer(replace...)
	r.rec = &Record{Version: recordVersion, Start: start.UTC(), Quick: quick, Reps: reps, Machine: readMachine(), Figures: map[string]*Figure{}}
	r.rec.Machine.Go = goVersion(root)
	r.rec.Commit, r.rec.Dirty = gitCommit(root)
	var failed []string
	for _, s := range steps {
		st := &Step{Name: s.name, Start: time.Now().UTC(), Load: loadAverage(), Output: s.name + ".txt"}
		r.rec.Steps = append(r.rec.Steps, st)
		if err := s.run(r, st); errors.Is(err, errSkipped) {
			st.Skipped = err.Error()
			fmt.Fprintf(log, "record: step %s %v\n", s.name, err)
		} else if err != nil {
			st.Error = err.Error()
			failed = append(failed, s.name)
			fmt.Fprintf(log, "record: step %s failed: %v\n", s.name, err)
		}
		st.End = time.Now().UTC()
	}
	r.rec.End = time.Now().UTC()
	if err := writeRecord(dir, r.rec); err != nil {
		return dir, err
	}
	if len(failed) > 0 {
		return dir, fmt.Errorf("steps failed: %s (the record in %s says why)", strings.Join(failed, ", "), dir)
	}
	return dir, nil
}

func writeRecord(dir string, r *Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "record.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(renderRecordReadme(r)), 0o644)
}

// renderDocs regenerates the README's and BENCHMARKS.md's blocks from the
// latest record under out.
func renderDocs(root, out string) error {
	dir, err := latestRecord(out)
	if err != nil {
		return err
	}
	rec, err := loadRecord(filepath.Join(dir, "record.json"))
	if err != nil {
		return err
	}
	for _, d := range docTargets(root, dir) {
		b, err := os.ReadFile(d.file)
		if err != nil {
			return err
		}
		doc, err := replaceBlock(string(b), d.block, d.render(rec))
		if err != nil {
			return fmt.Errorf("%s: %w", d.file, err)
		}
		if doc != string(b) {
			if err := os.WriteFile(d.file, []byte(doc), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// docTarget is a generated block of a document.
type docTarget struct {
	file, block string
	render      func(*Record) string
}

// docTargets lists the generated blocks, each rendered with the link to
// the record's README as seen from its document.
func docTargets(root, recordDir string) []docTarget {
	rel := func(from string) string {
		p, err := filepath.Rel(filepath.Dir(from), filepath.Join(recordDir, "README.md"))
		if err != nil {
			p = filepath.Join(recordDir, "README.md")
		}
		return filepath.ToSlash(p)
	}
	readme, bench := filepath.Join(root, "README.md"), filepath.Join(root, "docs", "BENCHMARKS.md")
	return []docTarget{
		{readme, blockReadme, func(r *Record) string { return renderReadme(r, rel(readme)) }},
		{bench, blockGlance, func(r *Record) string { return renderGlance(r, rel(bench)) }},
	}
}

func goVersion(root string) string {
	cmd := exec.Command("go", "env", "GOVERSION")
	cmd.Dir = root
	if b, err := cmd.Output(); err == nil {
		return strings.TrimSpace(string(b))
	}
	return runtime.Version()
}

// gitCommit returns the short commit of HEAD and whether tracked files
// differ from it.
func gitCommit(root string) (string, bool) {
	cmd := exec.Command("git", "rev-parse", "--short", "HEAD")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return "unknown", false
	}
	cmd = exec.Command("git", "status", "--porcelain", "--untracked-files=no")
	cmd.Dir = root
	st, err := cmd.Output()
	return strings.TrimSpace(string(b)), err != nil || len(strings.TrimSpace(string(st))) > 0
}
