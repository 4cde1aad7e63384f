// Command offrepl runs one replication job until SIGTERM or SIGINT: a
// mirror (local queue to a JetStream stream or Kafka topic), an ingest
// (stream or topic to a local queue) or a replica (a local map kept equal
// to a JetStream key-value bucket or a compacted Kafka topic). It prints
// progress and lag every --progress interval (--log-format json: one JSON
// object per line, with the job's metrics), serves its metrics for
// Prometheus on /metrics with --metrics-addr, and exits cleanly, with
// everything it acknowledged kept, on SIGTERM.
//
//	offrepl mirror  [flags]
//	offrepl ingest  [flags]
//	offrepl replica [flags]
//	offrepl help [COMMAND]
//
// Every flag may also come from a file named by --config: one flag per
// line, "name value" or "name = value", '#' starts a comment; a flag given
// on the command line wins over the file.
//
// Exit status: 0 after a clean stop; 2 for wrong arguments or an error
// that ended the job.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/offmap/offmap/internal/cliargs"
)

// command is one job kind: its help, its flags and how it runs.
type command struct {
	name     string
	summary  string // one line, for the list of commands
	help     string // what it does
	examples string // one per line, each with a comment line above it
	// setup defines the command's flags on fs and returns the function
	// that runs the job once they are parsed. run returns when ctx is
	// cancelled (nil: a clean stop) or on an error that ends the job; it
	// calls rep.Line with a one-line progress summary whenever asked to
	// through the channel tick, and rep.Expose once it has built what it
	// runs, with the function that returns its metrics.
	setup func(fs *flag.FlagSet) func(ctx context.Context, tick <-chan time.Time, rep *reporter) error
}

// commands lists the job kinds in the order "offrepl help" shows them;
// each command's file appends itself in an init function.
var commands []*command

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "offrepl: no command given (see 'offrepl help')")
		return cliargs.ExitError
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			writeOverview(stdout)
			return cliargs.ExitOK
		}
		args = []string{args[1], "--help"}
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "offrepl: unknown command %q (see 'offrepl help')\n", args[0])
		return cliargs.ExitError
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	config := fs.String("config", "", "read flags from `FILE` (\"name value\" per line); the command line wins")
	progress := fs.Duration("progress", 5*time.Second, "print progress and lag every `INTERVAL` (0: never)")
	metricsAddr := fs.String("metrics-addr", "", "serve the job's metrics for Prometheus on http://`ADDR`/metrics (host:port, :port)")
	logFormat := fs.String("log-format", "text", "progress lines as `FORMAT`: text, or json (one object per line)")
	job := cmd.setup(fs)
	pos, err := cliargs.Parse(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeHelp(stdout, cmd, fs)
			return cliargs.ExitOK
		}
		fmt.Fprintf(stderr, "offrepl: %s: %v (see 'offrepl %s --help')\n", cmd.name, err, cmd.name)
		return cliargs.ExitError
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "offrepl: %s: unexpected argument %q (see 'offrepl %s --help')\n", cmd.name, pos[0], cmd.name)
		return cliargs.ExitError
	}
	if *config != "" {
		if err := applyConfig(fs, *config); err != nil {
			fmt.Fprintf(stderr, "offrepl: %s: %v\n", cmd.name, err)
			return cliargs.ExitError
		}
	}
	if *logFormat != "text" && *logFormat != "json" {
		fmt.Fprintf(stderr, "offrepl: %s: --log-format %q: text or json (see 'offrepl %s --help')\n", cmd.name, *logFormat, cmd.name)
		return cliargs.ExitError
	}
	rep := &reporter{job: cmd.name, out: stdout, json: *logFormat == "json"}
	if *metricsAddr != "" {
		addr, stop, err := serveMetrics(*metricsAddr, rep)
		if err != nil {
			fmt.Fprintf(stderr, "offrepl: %s: %v\n", cmd.name, message(err.Error()))
			return cliargs.ExitError
		}
		defer stop()
		rep.Line("metrics on http://" + addr + "/metrics")
	}
	var tick <-chan time.Time
	if *progress > 0 {
		t := time.NewTicker(*progress)
		defer t.Stop()
		tick = t.C
	}
	if err := job(ctx, tick, rep); err != nil {
		fmt.Fprintf(stderr, "offrepl: %s: %s\n", cmd.name, message(err.Error()))
		return cliargs.ExitError
	}
	return cliargs.ExitOK
}

func lookup(name string) *command {
	for _, cmd := range commands {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
}

// applyConfig sets, from the file at path, every flag of fs that the
// command line did not set.
func applyConfig(fs *flag.FlagSet, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(strings.TrimSpace(name), " \t") {
			name, value = line, ""
			if i := strings.IndexAny(line, " \t"); i >= 0 {
				name, value = line[:i], line[i+1:]
			}
		}
		name = strings.TrimLeft(strings.TrimSpace(name), "-")
		value = strings.TrimSpace(value)
		if name == "config" {
			return fmt.Errorf("%s:%d: a config file cannot name another", path, n)
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("%s:%d: unknown flag %q", path, n, name)
		}
		if given[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, n, name, err)
		}
	}
	return sc.Err()
}

func writeOverview(w io.Writer) {
	fmt.Fprint(w, `offrepl runs one replication job between offmap and NATS JetStream or Kafka.

usage: offrepl COMMAND [flags]

commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprint(w, `
'offrepl COMMAND --help' describes a command, with examples. Every command
takes --config FILE (flags as "name value" lines; the command line wins)
and --progress INTERVAL. SIGTERM or SIGINT stops a job cleanly.
Exit status: 0 after a clean stop; 2 for a usage error or an error that
ended the job.
`)
}

// writeHelp prints a command's --help: usage, description, flags, examples.
func writeHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: offrepl %s [flags]\n\n%s\n", cmd.name, strings.TrimSpace(cmd.help))
	cliargs.WriteFlags(w, fs)
	fmt.Fprintf(w, "\nexamples:\n%s\n", strings.TrimRight(cmd.examples, "\n"))
}
