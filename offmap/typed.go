package offmap

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/offmap/offmap/internal/shm"
)

// ErrHandleType: a type that cannot be laid over a mapped value (see
// Acquire).
var ErrHandleType = errors.New("offmap: type cannot be laid over a mapped value")

// Acquire returns a pointer to key's value as a T, laid over the mapped
// bytes, creating the entry with a zero T when absent, as Chronicle-Values
// gives an interface over a value's fields. T must be free of pointers
// and of platform-sized or invalid-bit-pattern types: fixed-size
// integers, floats, arrays and structs of them, and the sync/atomic types
// (atomic.Int64, atomic.Uint32, ...), whose methods then act atomically on
// the file, for every process at once:
//
//	type Stats struct {
//		Hits, Bytes atomic.Int64
//		Buckets     [16]atomic.Uint32
//	}
//	st, err := offmap.Acquire[Stats](m, []byte("client-42"))
//	st.Hits.Add(1)
//
// The type is checked when acquired (ErrHandleType says which field
// breaks the rules), and a stored value of another size than T is
// ErrValueSize. Plain fields are plain memory: a process reading one while
// another writes it needs atomics or its own protocol. Update, UpdateKeys
// and CompareAndSwap refuse such a value (ErrPinned): change it through
// the pointer. Put of the same size stores it word by word, each word at
// once, so an atomic field sees either the old or the new value. The entry is pinned
// as by AcquireInt64: its value keeps its place and size for good. After
// Close the pointer reads zeros and its writes go nowhere (the mapping is
// replaced by private zero pages), so a stale pointer never faults.
func Acquire[T any](m *Map, key []byte) (*T, error) {
	t := reflect.TypeFor[T]()
	if err := checkHandleType(t); err != nil {
		return nil, err
	}
	b, err := m.acquire(key, int(t.Size()), t.String())
	if err != nil {
		return nil, err
	}
	return shm.Overlay[T](b, 0), nil
}

var handleTypes sync.Map // reflect.Type -> error (nil: fine)

func checkHandleType(t reflect.Type) error {
	if err, ok := handleTypes.Load(t); ok {
		if err == nil {
			return nil
		}
		return err.(error)
	}
	err := checkHandleField(t, t.String())
	if err == nil && t.Size() == 0 {
		err = fmt.Errorf("%w: %s has no bytes", ErrHandleType, t)
	}
	if err == nil && t.Align() > 8 {
		err = fmt.Errorf("%w: %s needs %d-byte alignment; values are 8-byte aligned", ErrHandleType, t, t.Align())
	}
	handleTypes.Store(t, err)
	return err
}

func checkHandleField(t reflect.Type, path string) error {
	if t.PkgPath() == "sync" {
		return fmt.Errorf("%w: %s is a %s, which works within one process only (use sync/atomic types)", ErrHandleType, path, t)
	}
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Array:
		return checkHandleField(t.Elem(), path+"[]")
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if err := checkHandleField(f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
		return nil
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		return fmt.Errorf("%w: %s is %s, whose size depends on the platform (use int64 or int32)", ErrHandleType, path, t.Kind())
	case reflect.Bool:
		return fmt.Errorf("%w: %s is a bool, which a file may hold as an invalid byte (use uint8 or atomic.Bool)", ErrHandleType, path)
	default:
		return fmt.Errorf("%w: %s is a %s, which holds a pointer", ErrHandleType, path, t.Kind())
	}
}
