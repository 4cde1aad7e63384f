package queue

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/offmap/offmap/bench/latency"
	"github.com/offmap/offmap/internal/shm"
)

// Write-to-read latency between two processes: this process appends
// 16-byte messages at a fixed rate, each stamped with its scheduled send
// time and its actual send time on the machine-wide monotonic clock; a
// child process reads them in the given wait mode and records now minus
// each stamp in HDR histograms. Measuring from the scheduled time charges
// a late writer to every message it delayed (coordinated omission).

const (
	latencyWarmup  = 50_000
	latencyMessage = 16
)

// latencyRecorder keeps the reader's two histograms.
type latencyRecorder struct{ corrected, raw *hdr.Histogram }

func newLatencyRecorder() latencyRecorder {
	return latencyRecorder{hdr.New(1, int64(10*time.Second), 3), hdr.New(1, int64(10*time.Second), 3)}
}

// record adds a message stamped sched (scheduled) and sent (actual), read
// at now.
func (r latencyRecorder) record(now, sched, sent int64) {
	r.corrected.RecordValue(now - sched)
	r.raw.RecordValue(now - sent)
}

func (r latencyRecorder) print() {
	for _, h := range []*hdr.Histogram{r.corrected, r.raw} {
		fmt.Println(h.ValueAtQuantile(50), h.ValueAtQuantile(99), h.ValueAtQuantile(99.9), h.Max())
	}
}

func latencyReader(q *Queue, mode WaitMode, n, warmup int, backToBack bool) int {
	t, err := q.Tailer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ack, err := openAck(q.dir, backToBack)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rec := newLatencyRecorder()
	fmt.Println("ready")
	ctx := context.Background()
	for seen := 0; seen < warmup+n; {
		if err := t.Wait(ctx, mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for {
			_, m, err := t.Next()
			if err != nil {
				break
			}
			now := latency.Nanotime()
			if seen >= warmup {
				rec.record(now, int64(binary.LittleEndian.Uint64(m)), int64(binary.LittleEndian.Uint64(m[8:])))
			}
			seen++
			ack.done(seen)
		}
	}
	rec.print()
	return 0
}

// The floor: the same two processes and stamps with no queue between
// them. The writer stores each message's two stamps in a ring in a shared
// file and publishes its count; the reader spins on the count, yielding
// as often as a spinning tailer does. What it measures is the Go runtime
// and the machine; the queue's own share of the spinning reader's latency
// is the difference. (bench/cfloor/spin.c is the same without Go.)

const (
	floorRing = 1 << 16 // messages: 0.65 s at 100,000/s
	floorFile = "floor"
	floorSize = 64 + floorRing*16
)

// mapFloor maps the shared file: the count at offset 0, then the ring.
func mapFloor(dir string, create bool) (*shm.Mapping, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, floorFile), flag, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if create {
		if err := f.Truncate(floorSize); err != nil {
			return nil, err
		}
	}
	return shm.Map(f, 0, floorSize, true)
}

func floorReader(dir string, n, warmup int, backToBack bool) int {
	m, err := mapFloor(dir, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ack, err := openAck(dir, backToBack)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mem := m.Bytes()
	count := shm.U64(mem, 0)
	rec := newLatencyRecorder()
	fmt.Println("ready")
	var yield shm.SpinYield
	for seen := uint64(0); seen < uint64(warmup+n); {
		for c := count.Load(); seen < c; seen++ {
			now := latency.Nanotime()
			slot := 64 + int(seen%floorRing)*16
			sched, sent := shm.U64(mem, slot).Load(), shm.U64(mem, slot+8).Load()
			if count.Load()-seen >= floorRing {
				fmt.Fprintln(os.Stderr, "floor reader: lapped by the writer")
				return 1
			}
			if seen >= uint64(warmup) {
				rec.record(now, int64(sched), int64(sent))
			}
			ack.done(int(seen + 1))
		}
		yield.Poll() // as Tailer.Wait(Spin)
	}
	rec.print()
	return 0
}

// Back to back: the writer sends each message as soon as the reader has
// read the one before, which the reader says by storing its count of
// messages read in a word of a file of its own (DIR.ack). One message is in
// flight at a time, so each is sent at once and read as soon as the
// reader sees it: the one-way latency with nothing but the two processes'
// cache-line transfers between them, as ping-pong benchmarks measure it.
// The floors do the same, so the comparison holds.

const ackSuffix = ".ack" // beside the queue's directory, which holds nothing foreign

// ackWord is the reader's count of messages read, or nothing when the
// writer paces its sends instead.
type ackWord struct{ count *atomic.Uint64 }

// openAck maps the ack file, made by the writer, if backToBack.
func openAck(dir string, backToBack bool) (ackWord, error) {
	if !backToBack {
		return ackWord{}, nil
	}
	f, err := os.OpenFile(dir+ackSuffix, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return ackWord{}, err
	}
	defer f.Close()
	if err := f.Truncate(64); err != nil {
		return ackWord{}, err
	}
	m, err := shm.Map(f, 0, 64, true) // unmapped at exit
	if err != nil {
		return ackWord{}, err
	}
	return ackWord{shm.U64(m.Bytes(), 0)}, nil
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

func (a ackWord) done(n int) {
	if a.count != nil {
		a.count.Store(uint64(n))
	}
}

// benchCrossProcess starts a reader process in the given wait mode (or
// the floor's reader) and sends it 16-byte messages at rate, or back to
// back when rate is 0, then reports the latencies it measured.
func benchCrossProcess(b *testing.B, mode WaitMode, floor bool, rate, minN, warmup int) {
	n := max(b.N, minN)
	dir := b.TempDir()
	backToBack := rate == 0
	ack, err := openAck(dir, backToBack)
	if err != nil {
		b.Fatal(err)
	}
	var send func(sched, sent int64, i int) error
	var cmd *exec.Cmd
	if floor {
		m, err := mapFloor(dir, true)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Unmap()
		mem := m.Bytes()
		count := shm.U64(mem, 0)
		send = func(sched, sent int64, i int) error {
			slot := 64 + (i%floorRing)*16
			shm.U64(mem, slot).Store(uint64(sched))
			shm.U64(mem, slot+8).Store(uint64(sent))
			count.Store(uint64(i + 1))
			return nil
		}
		cmd = helperCmd(b, "floor-reader", dir, n, warmup, b2i(backToBack))
	} else {
		q := openT(b, dir, Options{BlockSize: 4 << 20})
		msg := make([]byte, latencyMessage)
		send = func(sched, sent int64, _ int) error {
			binary.LittleEndian.PutUint64(msg, uint64(sched))
			binary.LittleEndian.PutUint64(msg[8:], uint64(sent))
			_, err := q.Append(msg)
			return err
		}
		cmd = helperCmd(b, "latency-reader", dir, int(mode), n, warmup, b2i(backToBack))
	}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Scan() // ready
	pacer := latency.NewPacer(latency.PacerOptions{Spin: 50 * time.Microsecond})
	defer pacer.Close()
	var gap int64
	if !backToBack {
		gap = int64(time.Second) / int64(rate)
	}
	start := latency.Nanotime() + int64(time.Millisecond)
	b.ResetTimer()
	for i := 0; i < warmup+n; i++ {
		sched := start + int64(i)*gap
		if backToBack {
			for ack.count.Load() < uint64(i) {
			}
			sched = latency.Nanotime()
		} else {
			pacer.WaitUntil(sched)
		}
		if err := send(sched, latency.Nanotime(), i); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := float64(latency.Nanotime()-start) / 1e9
	var c, r [4]float64
	sc.Scan()
	fmt.Sscan(sc.Text(), &c[0], &c[1], &c[2], &c[3])
	sc.Scan()
	fmt.Sscan(sc.Text(), &r[0], &r[1], &r[2], &r[3])
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	for i, name := range []string{"p50", "p99", "p99.9", "worst"} {
		b.ReportMetric(c[i]/1e3, name+"-us")
		b.ReportMetric(r[i]/1e3, "uncorrected-"+name+"-us")
	}
	ps := cmd.ProcessState
	b.ReportMetric(100*(ps.UserTime()+ps.SystemTime()).Seconds()/elapsed, "reader-cpu-%")
	if backToBack {
		b.ReportMetric(float64(warmup+n)/elapsed/1e6, "M-msgs/s")
	}
}

// BenchmarkCrossProcessSpin: the reader polls without pause, at 100,000
// messages a second. Run with -benchtime 500000x (messages measured).
func BenchmarkCrossProcessSpin(b *testing.B) {
	benchCrossProcess(b, Spin, false, 100_000, 100_000, latencyWarmup)
}

// BenchmarkCrossProcessSpinFloor: the same with no queue (see floorReader).
func BenchmarkCrossProcessSpinFloor(b *testing.B) {
	benchCrossProcess(b, Spin, true, 100_000, 100_000, latencyWarmup)
}

// BenchmarkCrossProcessSpinFull: the spinning reader, with each message
// sent as soon as the reader has read the one before (back to back).
func BenchmarkCrossProcessSpinFull(b *testing.B) {
	benchCrossProcess(b, Spin, false, 0, 100_000, latencyWarmup)
}

// BenchmarkCrossProcessSpinFullFloor: the same with no queue.
func BenchmarkCrossProcessSpinFullFloor(b *testing.B) {
	benchCrossProcess(b, Spin, true, 0, 100_000, latencyWarmup)
}

// BenchmarkCrossProcessBlock: the reader blocks (spinning 50 us first), at
// 100,000 messages a second: it rarely needs to sleep.
func BenchmarkCrossProcessBlock(b *testing.B) {
	benchCrossProcess(b, Block, false, 100_000, 100_000, latencyWarmup)
}

// BenchmarkCrossProcessWake: the reader blocks and, at 1,000 messages a
// second, sleeps in the kernel before every message: what it measures is
// the wake-up through the doorbell and the notifier. Run with -benchtime
// 5000x.
func BenchmarkCrossProcessWake(b *testing.B) { benchCrossProcess(b, Block, false, 1000, 2000, 500) }

// BenchmarkCrossProcessWakeThread: as BenchmarkCrossProcessWake, the
// reader in BlockThread, asleep on the doorbell itself.
func BenchmarkCrossProcessWakeThread(b *testing.B) {
	benchCrossProcess(b, BlockThread, false, 1000, 2000, 500)
}

// benchIdle blocks 1,000 tailers of 1,000 queues for two seconds and
// reports the CPU this process used meanwhile, as % of one core: what idle
// waiting costs. wait blocks the tailers and returns when ctx is done.
func benchIdle(b *testing.B, wait func(ctx context.Context, ts []*Tailer)) {
	const n = 1000
	dir := b.TempDir()
	ts := make([]*Tailer, n)
	for i := range ts {
		q := openT(b, fmt.Sprintf("%s/q%d", dir, i), Options{})
		ts[i] = tailerT(b, q)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { wait(ctx, ts); close(done) }()
	time.Sleep(200 * time.Millisecond) // let every tailer block
	meter, err := latency.StartCPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	time.Sleep(2 * time.Second)
	u, err := meter.Read()
	threads := osThreads()
	b.StopTimer()
	cancel()
	<-done
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(u.Percent, "cpu-%")
	b.ReportMetric(float64(threads), "os-threads")
}

// osThreads returns the number of OS threads of this process.
func osThreads() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(l, "Threads:"); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(n))
			return v
		}
	}
	return 0
}

// BenchmarkIdleBlockedTailers: 1,000 goroutines each blocked in
// Tailer.Wait(Block) on its own queue.
func BenchmarkIdleBlockedTailers(b *testing.B) {
	benchIdle(b, func(ctx context.Context, ts []*Tailer) {
		var wg sync.WaitGroup
		for _, t := range ts {
			wg.Add(1)
			go func() { defer wg.Done(); t.Wait(ctx, Block) }()
		}
		wg.Wait()
	})
}

// BenchmarkIdleWaitSet: one goroutine waiting on a WaitSet of 1,000 tailers.
func BenchmarkIdleWaitSet(b *testing.B) {
	benchIdle(b, func(ctx context.Context, ts []*Tailer) {
		s := NewWaitSet()
		for _, t := range ts {
			s.Add(t)
		}
		s.Wait(ctx, nil)
		for _, t := range ts {
			s.Remove(t)
		}
	})
}
