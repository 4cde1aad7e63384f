// Command ipc shows two processes sharing one map: it starts a writer
// process that publishes prices and a trade count, and reads them live from
// this process while the writer changes them.
//
//	go run ./examples/ipc
//
// The reader takes no lock and makes no system call per read: it reads the
// mapped memory the writer's stores land in.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/offmap/offmap/offmap"
)

var options = offmap.Options{Entries: 100, AverageKeySize: 8, AverageValueSize: 8}

var symbols = []string{"ACME", "GLOBEX", "INITECH"}

func main() {
	writer := flag.Bool("writer", false, "run as the writer process")
	path := flag.String("map", "", "map file (default: a temporary file)")
	updates := flag.Int("updates", 200, "price updates the writer publishes")
	flag.Parse()
	var err error
	if *writer {
		err = write(*path, *updates)
	} else {
		err = read(*path, *updates)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipc:", err)
		os.Exit(1)
	}
}

// write publishes prices with Put and counts trades with a handle, then
// sets "done".
func write(path string, updates int) error {
	m, err := offmap.Open(path, options)
	if err != nil {
		return err
	}
	defer m.Close()
	trades, err := m.AcquireInt64([]byte("trades"))
	if err != nil {
		return err
	}
	for i := 1; i <= updates; i++ {
		sym := symbols[i%len(symbols)]
		price := 100 + 10*math.Sin(float64(i)/10)
		if err := m.Put([]byte(sym), binary.LittleEndian.AppendUint64(nil, math.Float64bits(price))); err != nil {
			return err
		}
		trades.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
	return m.Put([]byte("done"), []byte{1})
}

// read starts the writer and prints what it sees change until "done".
func read(path string, updates int) error {
	if path == "" {
		dir, err := os.MkdirTemp("", "offmap-ipc-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "prices.map")
	}
	m, err := offmap.Open(path, options)
	if err != nil {
		return err
	}
	defer m.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-writer", "-map", path, "-updates", fmt.Sprint(updates))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Printf("reader %d: watching %s written by process %d\n", os.Getpid(), path, cmd.Process.Pid)
	trades, err := m.AcquireInt64([]byte("trades"))
	if err != nil {
		return err
	}
	var last int64
	buf := make([]byte, 0, 8)
	for {
		if done, _ := m.Has([]byte("done")); done {
			break
		}
		if n := trades.Load(); n/50 != last/50 {
			last = n
			fmt.Printf("after %3d trades:", n)
			for _, sym := range symbols {
				if buf, err = m.AppendValue(buf[:0], []byte(sym)); err == nil {
					fmt.Printf("  %s %.2f", sym, math.Float64frombits(binary.LittleEndian.Uint64(buf)))
				}
			}
			fmt.Println()
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	fmt.Printf("writer finished: %d trades seen by the reader\n", trades.Load())
	return nil
}
