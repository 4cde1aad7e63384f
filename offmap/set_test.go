package offmap

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
)

var setOpts = Options{Entries: 5000, AverageKeySize: 12}

func TestSet(t *testing.T) {
	p := tempPath(t)
	s, err := OpenSet(p, setOpts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if added, err := s.Add(key(i)); !added || err != nil {
			t.Fatalf("Add %d: %v %v", i, added, err)
		}
	}
	if added, err := s.Add(key(7)); added || err != nil {
		t.Fatalf("Add of a present key: %v %v", added, err)
	}
	if removed, err := s.Remove(key(7)); !removed || err != nil {
		t.Fatalf("Remove: %v %v", removed, err)
	}
	if has, _ := s.Has(key(7)); has {
		t.Fatal("a removed key is still there")
	}
	var keys []string
	for k := range s.All() {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	if s.Len() != 99 || len(keys) != 99 || keys[0] != string(key(0)) {
		t.Fatalf("Len %d, All %d keys", s.Len(), len(keys))
	}
	// No value goes in.
	if err := s.Map().Put(key(1), []byte("x")); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Put of a value into a set: %v", err)
	}
	if _, err := s.Map().AcquireInt64(key(1)); err == nil {
		t.Fatal("a value handle into a set")
	}
	if err := s.Map().Check(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopened, by OpenSet with no sizes or by Open.
	s, err = OpenSet(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if has, _ := s.Has(key(1)); !has || s.Len() != 99 {
		t.Fatalf("after reopening: Has %v, Len %d", has, s.Len())
	}
	s.Close()
	m, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Get(key(1)); err != nil || len(v) != 0 {
		t.Fatalf("Get through Open: %q %v", v, err)
	}
	m.Close()
}

// TestSetHasNoValueSpace: a set's entries take their header and key only.
func TestSetHasNoValueSpace(t *testing.T) {
	s, err := OpenSet(tempPath(t), setOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := setOpts
	o.AverageValueSize = 8
	m := openTest(t, o)
	for i := range 1000 {
		s.Add(key(i))
		mustPut(t, m, key(i), le(int64(i)))
	}
	ss, ms := s.Map().Stats(), m.Stats()
	if ss.MaxValueSize != 0 || ss.BytesUsed >= ms.BytesUsed || ss.EntrySpace >= ms.EntrySpace || ss.FileSize >= ms.FileSize {
		t.Fatalf("set: max value %d, %d of %d bytes used, file %d; map: %d of %d, file %d",
			ss.MaxValueSize, ss.BytesUsed, ss.EntrySpace, ss.FileSize, ms.BytesUsed, ms.EntrySpace, ms.FileSize)
	}
}

func TestSetOptions(t *testing.T) {
	p := tempPath(t)
	m, err := Open(p, small)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := OpenSet(p, Options{}); !errors.Is(err, ErrOptionsMismatch) {
		t.Fatalf("OpenSet of a map with values: %v", err)
	}
	if _, err := OpenSet(tempPath(t), Options{Entries: 10, AverageKeySize: 8, AverageValueSize: 8}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("OpenSet with a value size: %v", err)
	}
	if _, err := OpenSet(tempPath(t), Options{MaxValueSize: 8}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("OpenSet with a maximum value size: %v", err)
	}
}

func init() {
	children["set-add"] = func() error {
		s, err := OpenSet(os.Getenv("MAP"), Options{})
		if err != nil {
			return err
		}
		defer s.Close()
		n, _ := strconv.Atoi(os.Getenv("N"))
		seed, _ := strconv.Atoi(os.Getenv("SEED"))
		added := 0
		for _, i := range rand.New(rand.NewPCG(uint64(seed), 0)).Perm(n) {
			ok, err := s.Add(key(i))
			if err != nil {
				return err
			}
			if ok {
				added++
			}
		}
		os.Stdout.WriteString(strconv.Itoa(added))
		return nil
	}
}

// TestSetAcrossProcesses: three processes add the same keys in different
// orders; each key is added by exactly one of them.
func TestSetAcrossProcesses(t *testing.T) {
	p := tempPath(t)
	s, err := OpenSet(p, setOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 3000
	var wg sync.WaitGroup
	counts := make([]int, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := child(t, "set-add", "MAP="+p, "N="+strconv.Itoa(n), "SEED="+strconv.Itoa(i))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			counts[i], errs[i] = strconv.Atoi(string(out))
			if err != nil {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	if sum := counts[0] + counts[1] + counts[2]; sum != n || s.Len() != n {
		t.Fatalf("processes added %v keys (%d), Len %d; want %d", counts, sum, s.Len(), n)
	}
	if err := s.Map().Check(); err != nil {
		t.Fatal(err)
	}
}
