package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// recordVersion is the version of record.json's layout; render refuses
// records from a later one.
const recordVersion = 1

// Record is everything one run of the command measured, as record.json
// holds it: where and when it ran, every command it ran, and every figure
// with each repetition's value.
type Record struct {
	Version int       `json:"version"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Quick   bool      `json:"quick"`
	Reps    int       `json:"repetitions"`
	Machine Machine   `json:"machine"`
	Commit  string    `json:"commit"`
	Dirty   bool      `json:"dirty"` // the work tree had uncommitted changes
	Steps   []*Step   `json:"steps"`

	// Figures maps a figure's name ("offmap/Get/ns/op", or a ratio's
	// "ratio/...") to its values, one per repetition.
	Figures  map[string]*Figure `json:"figures"`
	Sweeps   []*Sweep           `json:"sweeps"`
	Profiles []*Profile         `json:"profiles,omitempty"`
}

// Profile is the top of one CPU profile the record took (the profiles
// step), as pprof -top printed it.
type Profile struct {
	Name string `json:"name"`
	What string `json:"what"`
	Top  string `json:"top"`
}

// Machine describes the computer a record was made on.
type Machine struct {
	CPU       string  `json:"cpu"`
	CPUs      int     `json:"cpus"`
	MemoryGiB float64 `json:"memory_gib"`
	OS        string  `json:"os"`
	Arch      string  `json:"arch"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
}

// Step is one part of the suite: the commands it ran, when, and the load
// average of the machine before it started.
type Step struct {
	Name     string     `json:"name"`
	Start    time.Time  `json:"start"`
	End      time.Time  `json:"end"`
	Load     [3]float64 `json:"load_average"`
	Commands []string   `json:"commands"`
	Output   string     `json:"output"` // the file, in the record's directory, holding what they printed
	Error    string     `json:"error,omitempty"`
	Skipped  string     `json:"skipped,omitempty"` // why the step could not run on this machine
}

// Figure is one measured quantity, with each repetition's value and the
// spread over them.
type Figure struct {
	Unit   string    `json:"unit"`
	Values []float64 `json:"values"`
	Min    float64   `json:"min"`
	Median float64   `json:"median"`
	Max    float64   `json:"max"`
}

// Sweep is one EDA sweep: every count it tried, with its verdict.
type Sweep struct {
	Name string `json:"name"` // loop, park, or one (one instance)
	Wait string `json:"wait"`
	// Placement is edabench's --placement: empty or "process" for all
	// instances in one process, "cpu" for a process per CPU.
	Placement string `json:"placement,omitempty"`
	// NoServiceProbes: messages were timed end to end only (edabench
	// --service-probes=false); records before 2026-12-07 had the probes.
	NoServiceProbes bool         `json:"no_service_probes,omitempty"`
	Dir             string       `json:"dir"` // in the record's directory: sweep.csv, sweep.json, sweep.png
	Runs            int          `json:"runs"`
	Run             string       `json:"run"`   // the length of one run
	Tmpfs           bool         `json:"tmpfs"` // the queues were on tmpfs
	Verdict         string       `json:"verdict"`
	Counts          []SweepCount `json:"counts"`
}

// SweepCount is one instance count of a sweep, as its sweep.csv row says.
type SweepCount struct {
	Instances   int     `json:"instances"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	P999        float64 `json:"p99_9_ms"`
	CPU         float64 `json:"cpu_percent"`
	Meets       bool    `json:"meets_sla"`
	Runs        int     `json:"runs"`
	RunsMeeting int     `json:"runs_meeting_sla"`
}

// Largest returns the largest count every run of which met the SLA (with
// one run or the count judged pooled, the sweep's verdict), and the
// largest the sweep's verdict passed; 0 when none did.
func (s *Sweep) Largest() (allRuns, verdict int) {
	for _, c := range s.Counts {
		if !c.Meets {
			continue
		}
		verdict = max(verdict, c.Instances)
		if c.Runs == 0 || c.RunsMeeting == c.Runs {
			allRuns = max(allRuns, c.Instances)
		}
	}
	return allRuns, verdict
}

// Count returns the row of n instances, if the sweep tried it.
func (s *Sweep) Count(n int) (SweepCount, bool) {
	for _, c := range s.Counts {
		if c.Instances == n {
			return c, true
		}
	}
	return SweepCount{}, false
}

// add appends one repetition's value of a figure.
func (r *Record) add(name, unit string, v float64) {
	if r.Figures == nil {
		r.Figures = map[string]*Figure{}
	}
	f := r.Figures[name]
	if f == nil {
		f = &Figure{Unit: unit}
		r.Figures[name] = f
	}
	f.Values = append(f.Values, v)
	f.summarize()
}

func (f *Figure) summarize() {
	s := slices.Clone(f.Values)
	slices.Sort(s)
	f.Min, f.Max, f.Median = s[0], s[len(s)-1], median(s)
}

// median of sorted values; the mean of the middle two for an even count.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Figure returns a figure by name, or nil.
func (r *Record) Figure(name string) *Figure { return r.Figures[name] }

// Sweep returns the named sweep, or nil.
func (r *Record) Sweep(name string) *Sweep {
	for _, s := range r.Sweeps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// loadRecord reads record.json.
func loadRecord(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Version < 1 || r.Version > recordVersion {
		return nil, fmt.Errorf("%s: record version %d, this command reads 1 to %d", path, r.Version, recordVersion)
	}
	return &r, nil
}

// latestRecord returns the directory, under results, of the newest record:
// directories are named by date first, so the last in name order.
func latestRecord(results string) (string, error) {
	dirs, err := filepath.Glob(filepath.Join(results, "*", "record.json"))
	if err != nil {
		return "", err
	}
	if len(dirs) == 0 {
		return "", fmt.Errorf("no record.json under %s", results)
	}
	slices.Sort(dirs)
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

// readMachine describes this machine from /proc where it can.
func readMachine() Machine {
	m := Machine{CPUs: numCPU(), OS: goos, Arch: goarch}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	if kib, ok := meminfoKiB("MemTotal"); ok {
		m.MemoryGiB = math.Round(kib/(1<<20)*10) / 10
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// loadAverage reads /proc/loadavg; zeros where there is none.
func loadAverage() (l [3]float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// meminfoKiB reads one figure of /proc/meminfo, in KiB; false where there
// is none (not Linux).
func meminfoKiB(key string) (float64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			if fields := strings.Fields(v); len(fields) > 0 {
				kib, err := strconv.ParseFloat(fields[0], 64)
				return kib, err == nil
			}
		}
	}
	return 0, false
}
