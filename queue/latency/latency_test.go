package latency

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/offmap/offmap/queue"
)

// The writer (this process) appends 16-byte messages at a fixed rate,
// each stamped with its scheduled send time on the wall clock, which both
// processes share. The reader (a child process) records now - stamp
// in an HDR histogram: a late writer is charged to the messages it
// delayed (coordinated omission corrected).

const (
	rate     = 100000
	warmup   = 50000
	measured = 500000
)

// monoNow returns the wall clock (CLOCK_REALTIME through the vDSO, which
// both processes share; a raw clock_gettime system call would cost more
// than what is measured).
func monoNow() int64 { return time.Now().UnixNano() }

func TestMain(m *testing.M) {
	if dir := os.Getenv("LATENCY_READER"); dir != "" {
		mode, _ := strconv.Atoi(os.Getenv("LATENCY_MODE"))
		os.Exit(reader(dir, queue.WaitMode(mode)))
	}
	os.Exit(m.Run())
}

func reader(dir string, mode queue.WaitMode) int {
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer q.Close()
	t, _ := q.Tailer()
	h := hdrhistogram.New(1, int64(10*time.Second), 3)
	raw := hdrhistogram.New(1, int64(10*time.Second), 3)
	fmt.Println("ready")
	ctx := context.Background()
	for n := 0; n < warmup+measured; {
		if err := t.Wait(ctx, mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for {
			_, m, err := t.Next()
			if err != nil {
				break
			}
			now := monoNow()
			if n >= warmup {
				h.RecordValue(now - int64(binary.LittleEndian.Uint64(m)))
				raw.RecordValue(now - int64(binary.LittleEndian.Uint64(m[8:])))
			}
			n++
		}
	}
	fmt.Println(h.ValueAtQuantile(50), h.ValueAtQuantile(99), h.ValueAtQuantile(99.9), h.Max(),
		raw.ValueAtQuantile(50), raw.ValueAtQuantile(99), raw.ValueAtQuantile(99.9), raw.Max())
	return 0
}

func benchLatency(b *testing.B, mode queue.WaitMode) {
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		q, err := queue.Open(dir, queue.Options{BlockSize: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LATENCY_READER="+dir, "LATENCY_MODE="+strconv.Itoa(int(mode)))
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		sc.Scan() // "ready"
		var usage0 unix.Rusage
		unix.Getrusage(unix.RUSAGE_CHILDREN, &usage0)
		gap := int64(time.Second / rate)
		msg := make([]byte, 16)
		start := monoNow() + int64(time.Millisecond)
		for n := 0; n < warmup+measured; n++ {
			sched := start + int64(n)*gap
			for monoNow() < sched {
			}
			binary.LittleEndian.PutUint64(msg, uint64(sched))
			binary.LittleEndian.PutUint64(msg[8:], uint64(monoNow()))
			if _, err := q.Append(msg); err != nil {
				b.Fatal(err)
			}
		}
		sc.Scan()
		var p50, p99, p999, worst, r50, r99, r999, rworst float64
		fmt.Sscan(sc.Text(), &p50, &p99, &p999, &worst, &r50, &r99, &r999, &rworst)
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		q.Close()
		b.ReportMetric(p50/1e3, "p50-us")
		b.ReportMetric(p99/1e3, "p99-us")
		b.ReportMetric(p999/1e3, "p99.9-us")
		b.ReportMetric(worst/1e3, "worst-us")
		// Uncorrected: from the actual append, forgiving a late writer.
		b.ReportMetric(r50/1e3, "raw-p50-us")
		b.ReportMetric(r99/1e3, "raw-p99-us")
		b.ReportMetric(r999/1e3, "raw-p99.9-us")
		b.ReportMetric(rworst/1e3, "raw-worst-us")
		ps := cmd.ProcessState
		cpu := ps.UserTime() + ps.SystemTime()
		b.ReportMetric(100*cpu.Seconds()/(float64(warmup+measured)/rate), "reader-cpu-%")
	}
}

// BenchmarkLatencySpin: the reader polls without pause.
func BenchmarkLatencySpin(b *testing.B) { benchLatency(b, queue.Spin) }

// BenchmarkLatencyBlock: the reader sleeps in the kernel between messages
// and is woken through the queue's doorbell and its notifier.
func BenchmarkLatencyBlock(b *testing.B) { benchLatency(b, queue.Block) }
