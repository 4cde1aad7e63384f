package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/PowerDNS/lmdb-go/lmdb"
	"github.com/offmap/offmap/bench/peers"
)

// writeMachine prints the date, the machine, the versions and the command.
func writeMachine(w io.Writer, started time.Time, load string, srv *peers.RedisServer, args []string) {
	fmt.Fprintf(w, "- Date: %s\n", started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- Machine: %d cores (nproc), %s, Linux %s, %s memory; load average %s at the start\n",
		runtime.NumCPU(), cpuModel(), kernel(), memory(), load)
	cmd := "go run ./cmd/peers"
	if len(args) > 0 {
		cmd += " " + strings.Join(args, " ")
	}
	fmt.Fprintf(w, "- Command: `cd bench/peers && %s`\n", cmd)
	major, minor, patch, _ := lmdb.Version()
	fmt.Fprintf(w, "- Versions: %s; offmap %s; LMDB %d.%d.%d (bundled C library)", runtime.Version(), offmapCommit(), major, minor, patch)
	if srv != nil {
		fmt.Fprintf(w, "; redis-server %s", srv.Version)
	}
	fmt.Fprintln(w)
	if deps := modules(); deps != "" {
		fmt.Fprintf(w, "- Modules: %s\n", deps)
	}
	fmt.Fprintln(w)
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func memory() string {
	b, _ := os.ReadFile("/proc/meminfo")
	var kb int64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err != nil {
		return "?"
	}
	return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// offmapCommit is the commit of the work tree this runs from, with
// "+changes" when it has uncommitted changes.
func offmapCommit() string {
	wd, _ := os.Getwd()
	root := filepath.Join(wd, "..", "..")
	if _, err := os.Stat(filepath.Join(wd, "go.mod")); err != nil {
		root = wd
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "(commit unknown)"
	}
	c := "commit " + strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " +changes"
	}
	return c
}

// modules lists the peers' module versions this binary was built with.
func modules() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	want := []string{"go.etcd.io/bbolt", "github.com/PowerDNS/lmdb-go", "github.com/VictoriaMetrics/fastcache",
		"github.com/redis/go-redis/v9", "github.com/nats-io/nats-server/v2", "github.com/nats-io/nats.go",
		"github.com/twmb/franz-go", "github.com/twmb/franz-go/pkg/kfake"}
	var out []string
	for _, p := range want {
		for _, d := range bi.Deps {
			if d.Path == p {
				v := d.Version
				if d.Replace != nil {
					v = d.Replace.Version
				}
				out = append(out, p+" "+v)
			}
		}
	}
	return strings.Join(out, ", ")
}
