package queue

import (
	"encoding"
	"fmt"

	"github.com/offmap/offmap/values"
)

// Typed messages: Go's counterpart of Chronicle Queue's method writers and
// readers. A fixed-layout type (values.Codec: no pointers, no padding)
// travels as its memory image, encoded straight into the reserved slot
// and decoded straight out of the mapped file: no allocation. Any other
// type travels as its binary form (encoding.BinaryAppender and
// encoding.BinaryUnmarshaler).

// Appender appends messages of the fixed-layout type T.
type Appender[T any] struct {
	q     *Queue
	codec *values.Codec[T]
}

// NewAppender returns an appender of T's to q, or the error of
// values.NewCodec saying why T has no fixed layout.
func NewAppender[T any](q *Queue) (*Appender[T], error) {
	c, err := values.NewCodec[T]()
	if err != nil {
		return nil, err
	}
	return &Appender[T]{q: q, codec: c}, nil
}

// Append appends *v as one message and returns its index.
func (a *Appender[T]) Append(v *T) (uint64, error) {
	w, err := a.q.Reserve(a.codec.Size())
	if err != nil {
		return 0, err
	}
	if err := a.codec.Encode(w.Bytes(), v); err != nil {
		w.Abort()
		return 0, err
	}
	return w.Commit()
}

// Reader reads messages of the fixed-layout type T through a tailer.
type Reader[T any] struct {
	t     *Tailer
	codec *values.Codec[T]
}

// NewReader returns a reader of T's from t.
func NewReader[T any](t *Tailer) (*Reader[T], error) {
	c, err := values.NewCodec[T]()
	if err != nil {
		return nil, err
	}
	return &Reader[T]{t: t, codec: c}, nil
}

// Next decodes the next message into *v and returns its index, or
// ErrNoMessage. A message of another size than T is an error wrapping
// values.ErrSize, and the reader stays before it.
func (r *Reader[T]) Next(v *T) (uint64, error) {
	h, err := r.t.peek()
	if err != nil {
		return 0, err
	}
	msg, err := r.t.message(h)
	if err != nil {
		return 0, err
	}
	if n := len(msg); n != r.codec.Size() {
		return 0, fmt.Errorf("%w: message %d:%d has %d bytes, a %T has %d", values.ErrSize, r.t.c.num, r.t.seq, n, *v, r.codec.Size())
	}
	idx := r.t.pass(h)
	return idx, r.codec.Decode(msg, v)
}

// Tailer returns the reader's tailer, for Wait, Seek and Ack.
func (r *Reader[T]) Tailer() *Tailer { return r.t }

// AppendBinary appends v's binary form as one message. buf is scratch
// space that it returns, grown, for the next call: reuse it to append
// without garbage.
func AppendBinary(q *Queue, v encoding.BinaryAppender, buf []byte) (uint64, []byte, error) {
	b, err := v.AppendBinary(buf[:0])
	if err != nil {
		return 0, buf, err
	}
	idx, err := q.Append(b)
	return idx, b, err
}

// NextBinary reads the next message into v with its UnmarshalBinary and
// returns its index, or ErrNoMessage. If UnmarshalBinary fails, the
// tailer stays before the message.
func NextBinary(t *Tailer, v encoding.BinaryUnmarshaler) (uint64, error) {
	h, err := t.peek()
	if err != nil {
		return 0, err
	}
	msg, err := t.message(h)
	if err != nil {
		return 0, err
	}
	if err := v.UnmarshalBinary(msg); err != nil {
		return 0, fmt.Errorf("queue: message %d:%d: %w", t.c.num, t.seq, err)
	}
	return t.pass(h), nil
}
