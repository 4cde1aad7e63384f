package queue

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// FuzzCycleFile writes arbitrary bytes as a queue's only cycle file, then
// reads, seeks, appends and takes statistics: any outcome but a panic, a
// fault or a hang is fine.
func FuzzCycleFile(f *testing.F) {
	seedDir := f.TempDir()
	// The seeds are the same every run: the shortest start padding.
	defer func(g func() int) { startPadLines = g }(startPadLines)
	startPadLines = func() int { return 1 }
	q, err := Open(seedDir, Options{IndexSpacing: 1, BlockSize: 16 << 10, MaxCycleSize: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		q.Append(msgOf(i)[:i%13])
	}
	w, _ := q.Reserve(5) // a busy slot
	cs, _ := q.Cycles()
	seed, _ := os.ReadFile(q.cyclePath(cs[0]))
	w.Commit()
	q.Close()
	f.Add(seed[:16<<10])
	f.Add(seed[:dataStart+64])
	f.Add(seed[:100])
	bad := append([]byte(nil), seed[:16<<10]...)
	binary.LittleEndian.PutUint64(bad[hintOff:], packHint(5, 1<<30))
	binary.LittleEndian.PutUint64(bad[l1Off:], 12345)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			return
		}
		defer failIfHung(5 * time.Second)()
		dir := t.TempDir()
		q, err := Open(dir, Options{IndexSpacing: 1, BlockSize: 16 << 10, MaxCycleSize: 64 << 10, SkipAfter: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		name := q.cycleName(0)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		q.bumpLatest(0)
		tl, _ := q.Tailer()
		for i := 0; i < 1000; i++ {
			if _, _, err := tl.Next(); err != nil {
				break
			}
		}
		for _, s := range []uint32{0, 1, 3, 17, 1 << 20} {
			tl.Seek(Index(0, s))
			tl.HasNext()
		}
		tl.SeekEnd()
		q.Append([]byte("fuzz"))
		q.Stats()
		q.Check()
		tl.SeekStart()
		tl.Drain(1000, func(uint64, []byte) bool { return true })
	})
}

// failIfHung crashes the process, with every goroutine's stack, unless the
// returned function is called within d: a file that makes the queue hang
// must fail the fuzzer, which otherwise waits on it forever.
func failIfHung(d time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(d):
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("hung for %v:\n%s", d, buf[:runtime.Stack(buf, true)]))
		}
	}()
	return func() { close(done) }
}
