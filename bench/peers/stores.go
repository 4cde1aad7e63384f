package peers

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/PowerDNS/lmdb-go/lmdb"
	"github.com/VictoriaMetrics/fastcache"
	"github.com/offmap/offmap/offmap"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
)

// Store is a map peer opened on a fresh directory: keys map to unsigned
// integers, stored as each peer's users would store them (8 bytes little
// endian; decimal text in Redis, whose INCR needs it).
type Store interface {
	Put(key []byte, v uint64) error
	// Get returns key's value, or an error wrapping errMissing.
	Get(key []byte) (uint64, error)
	// Incr adds one to key's value as an atomic read-modify-write.
	Incr(key []byte) error
	Close() error
}

// loader is a Store with a faster untimed way to fill itself (big
// transactions, pipelines) for the entries the timed insert did not reach.
type loader interface {
	Load(keys [][]byte, val func(j int) uint64) error
}

// batchGetter reads many keys at once, for the untimed final check.
type batchGetter interface {
	GetMany(keys [][]byte, dst []uint64) error
}

var errMissing = errors.New("key not found")

func le(v uint64) [8]byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return b
}

func fromLE(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("value of %d bytes, want 8", len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

func incrLE(v []byte, found bool) ([]byte, offmap.Op) {
	var n uint64
	if found && len(v) == 8 {
		n = binary.LittleEndian.Uint64(v)
	}
	return binary.LittleEndian.AppendUint64(v[:0], n+1), offmap.OpPut
}

// ---- offmap ----

type offmapStore struct {
	m       *offmap.Map
	buf     []byte
	handles bool // Incr through a value handle acquired per call
}

func openOffmap(dir string, entries int, handles bool) (Store, error) {
	m, err := offmap.Open(filepath.Join(dir, "peers.map"), offmap.Options{
		Entries: entries, AverageKeySize: 16, AverageValueSize: 8,
	})
	if err != nil {
		return nil, err
	}
	return &offmapStore{m: m, buf: make([]byte, 0, 16), handles: handles}, nil
}

func (s *offmapStore) Put(k []byte, v uint64) error {
	b := le(v)
	return s.m.Put(k, b[:])
}

func (s *offmapStore) Get(k []byte) (uint64, error) {
	var err error
	s.buf, err = s.m.AppendValue(s.buf[:0], k)
	if errors.Is(err, offmap.ErrNotFound) {
		return 0, errMissing
	}
	if err != nil {
		return 0, err
	}
	return fromLE(s.buf)
}

func (s *offmapStore) Incr(k []byte) error {
	if s.handles {
		h, err := s.m.AcquireInt64(k)
		if err != nil {
			return err
		}
		h.Add(1)
		return nil
	}
	return s.m.Update(k, incrLE)
}

func (s *offmapStore) Close() error { return s.m.Close() }

// ---- Go map + sync.RWMutex ----

type goMapStore struct {
	mu sync.RWMutex
	m  map[string]uint64
}

func openGoMap(entries int) Store { return &goMapStore{m: make(map[string]uint64, entries)} }

func (s *goMapStore) Put(k []byte, v uint64) error {
	s.mu.Lock()
	s.m[string(k)] = v
	s.mu.Unlock()
	return nil
}

func (s *goMapStore) Get(k []byte) (uint64, error) {
	s.mu.RLock()
	v, ok := s.m[string(k)]
	s.mu.RUnlock()
	if !ok {
		return 0, errMissing
	}
	return v, nil
}

func (s *goMapStore) Incr(k []byte) error {
	s.mu.Lock()
	s.m[string(k)]++
	s.mu.Unlock()
	return nil
}

func (s *goMapStore) Close() error { s.m = nil; return nil }

// ---- fastcache ----

type fastcacheStore struct {
	c   *fastcache.Cache
	buf []byte
}

// fastcache is a cache: it evicts when full, so it is given room enough
// that the 1M entries never are.
func openFastcache(entries int) Store {
	return &fastcacheStore{c: fastcache.New(max(256<<20, entries*256)), buf: make([]byte, 0, 16)}
}

func (s *fastcacheStore) Put(k []byte, v uint64) error {
	b := le(v)
	s.c.Set(k, b[:])
	return nil
}

func (s *fastcacheStore) Get(k []byte) (uint64, error) {
	var ok bool
	s.buf, ok = s.c.HasGet(s.buf[:0], k)
	if !ok {
		return 0, errMissing
	}
	return fromLE(s.buf)
}

// Incr is a Get and a Set: fastcache has no read-modify-write, so this is
// atomic only because one goroutine uses the cache.
func (s *fastcacheStore) Incr(k []byte) error {
	v, err := s.Get(k)
	if err != nil {
		return err
	}
	return s.Put(k, v+1)
}

func (s *fastcacheStore) Close() error { s.c.Reset(); return nil }

// ---- bbolt ----

var boltBucket = []byte("peers")

type boltStore struct{ db *bolt.DB }

func openBolt(dir string, noSync bool) (*boltStore, error) {
	// The freelist settings are etcd's: without them every commit writes
	// the whole freelist, and an update of a 1M-entry file costs 8x more.
	db, err := bolt.Open(filepath.Join(dir, "peers.bolt"), 0o600, &bolt.Options{
		Timeout: time.Second, NoSync: noSync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	return &boltStore{db: db}, nil
}

func (s *boltStore) Put(k []byte, v uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := le(v)
		return tx.Bucket(boltBucket).Put(k, b[:])
	})
}

func (s *boltStore) Get(k []byte) (v uint64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket).Get(k)
		if b == nil {
			return errMissing
		}
		v, err = fromLE(b)
		return err
	})
	return v, err
}

func (s *boltStore) Incr(k []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		var n uint64
		if b := bk.Get(k); b != nil {
			var err error
			if n, err = fromLE(b); err != nil {
				return err
			}
		}
		b := le(n + 1)
		return bk.Put(k, b[:])
	})
}

func (s *boltStore) Load(keys [][]byte, val func(int) uint64) error {
	for lo := 0; lo < len(keys); lo += 50_000 {
		hi := min(lo+50_000, len(keys))
		if err := s.db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(boltBucket)
			for j := lo; j < hi; j++ {
				b := le(val(j))
				if err := bk.Put(keys[j], b[:]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *boltStore) GetMany(keys [][]byte, dst []uint64) error {
	return s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		for j, k := range keys {
			b := bk.Get(k)
			if b == nil {
				return fmt.Errorf("%q: %w", k, errMissing)
			}
			var err error
			if dst[j], err = fromLE(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStore) Close() error { return s.db.Close() }

// ---- LMDB ----

type lmdbStore struct {
	env *lmdb.Env
	dbi lmdb.DBI
	rd  *lmdb.Txn // a read-only transaction, renewed for each Get
}

// lmdbMapSize bounds the LMDB file; pages are written as used.
const lmdbMapSize = 4 << 30

// openLMDB opens an environment in dir: with noSync, MDB_NOSYNC and
// MDB_WRITEMAP (commits write into the shared mapping, as offmap does, and
// leave writing back to the kernel; without MDB_WRITEMAP each commit's
// pwrite calls make an update 5x slower on these machines); otherwise
// LMDB's defaults, which fsync every commit.
func openLMDB(dir string, noSync bool) (*lmdbStore, error) {
	env, err := lmdb.NewEnv()
	if err != nil {
		return nil, err
	}
	if err := env.SetMapSize(lmdbMapSize); err != nil {
		env.Close()
		return nil, err
	}
	var flags uint
	if noSync {
		flags |= lmdb.NoSync | lmdb.WriteMap
	}
	if err := env.Open(dir, flags, 0o600); err != nil {
		env.Close()
		return nil, err
	}
	s := &lmdbStore{env: env}
	if err := env.Update(func(txn *lmdb.Txn) (err error) {
		s.dbi, err = txn.OpenRoot(lmdb.Create)
		return err
	}); err != nil {
		env.Close()
		return nil, err
	}
	if s.rd, err = env.BeginTxn(nil, lmdb.Readonly); err != nil {
		env.Close()
		return nil, err
	}
	s.rd.RawRead = true
	s.rd.Reset()
	return s, nil
}

func (s *lmdbStore) Put(k []byte, v uint64) error {
	return s.env.Update(func(txn *lmdb.Txn) error {
		b := le(v)
		return txn.Put(s.dbi, k, b[:], 0)
	})
}

// Get runs a read-only transaction: the renewed one, as LMDB's
// documentation recommends for frequent reads.
func (s *lmdbStore) Get(k []byte) (uint64, error) {
	if err := s.rd.Renew(); err != nil {
		return 0, err
	}
	defer s.rd.Reset()
	b, err := s.rd.Get(s.dbi, k)
	if lmdb.IsNotFound(err) {
		return 0, errMissing
	}
	if err != nil {
		return 0, err
	}
	return fromLE(b)
}

func (s *lmdbStore) Incr(k []byte) error {
	return s.env.Update(func(txn *lmdb.Txn) error {
		txn.RawRead = true
		var n uint64
		b, err := txn.Get(s.dbi, k)
		switch {
		case lmdb.IsNotFound(err):
		case err != nil:
			return err
		default:
			if n, err = fromLE(b); err != nil {
				return err
			}
		}
		nb := le(n + 1)
		return txn.Put(s.dbi, k, nb[:], 0)
	})
}

func (s *lmdbStore) Load(keys [][]byte, val func(int) uint64) error {
	for lo := 0; lo < len(keys); lo += 100_000 {
		hi := min(lo+100_000, len(keys))
		if err := s.env.Update(func(txn *lmdb.Txn) error {
			for j := lo; j < hi; j++ {
				b := le(val(j))
				if err := txn.Put(s.dbi, keys[j], b[:], 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *lmdbStore) GetMany(keys [][]byte, dst []uint64) error {
	return s.env.View(func(txn *lmdb.Txn) error {
		txn.RawRead = true
		for j, k := range keys {
			b, err := txn.Get(s.dbi, k)
			if err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			if dst[j], err = fromLE(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *lmdbStore) Close() error {
	s.rd.Abort()
	return s.env.Close()
}

// ---- Redis ----

type redisStore struct {
	c   *redis.Client
	ctx context.Context
	buf []byte
}

// openRedis empties the server's database and returns a client with one
// connection: every call is a round trip, as one goroutine makes them.
func openRedis(srv *RedisServer) (*redisStore, error) {
	s := &redisStore{c: srv.Client(1), ctx: context.Background()}
	if err := s.c.FlushAll(s.ctx).Err(); err != nil {
		s.c.Close()
		return nil, err
	}
	return s, nil
}

func (s *redisStore) Put(k []byte, v uint64) error {
	s.buf = strconv.AppendUint(s.buf[:0], v, 10)
	return s.c.Set(s.ctx, string(k), s.buf, 0).Err()
}

func (s *redisStore) Get(k []byte) (uint64, error) {
	v, err := s.c.Get(s.ctx, string(k)).Uint64()
	if err == redis.Nil {
		return 0, errMissing
	}
	return v, err
}

func (s *redisStore) Incr(k []byte) error { return s.c.Incr(s.ctx, string(k)).Err() }

func (s *redisStore) Load(keys [][]byte, val func(int) uint64) error {
	for lo := 0; lo < len(keys); lo += 1000 {
		hi := min(lo+1000, len(keys))
		args := make([]any, 0, 2*(hi-lo))
		for j := lo; j < hi; j++ {
			args = append(args, string(keys[j]), strconv.FormatUint(val(j), 10))
		}
		if err := s.c.MSet(s.ctx, args...).Err(); err != nil {
			return err
		}
	}
	return nil
}

func (s *redisStore) GetMany(keys [][]byte, dst []uint64) error {
	for lo := 0; lo < len(keys); lo += 1000 {
		hi := min(lo+1000, len(keys))
		ks := make([]string, 0, hi-lo)
		for j := lo; j < hi; j++ {
			ks = append(ks, string(keys[j]))
		}
		vs, err := s.c.MGet(s.ctx, ks...).Result()
		if err != nil {
			return err
		}
		for i, v := range vs {
			str, ok := v.(string)
			if !ok {
				return fmt.Errorf("%q: %w", ks[i], errMissing)
			}
			if dst[lo+i], err = strconv.ParseUint(str, 10, 64); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *redisStore) Close() error {
	err := s.c.FlushAll(s.ctx).Err()
	if cerr := s.c.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeAll removes a peer's directory, ignoring what is already gone.
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, "peers:", err)
	}
}
