package values

import "unsafe"

// This file holds all of the package's unsafe code: byte views and copies
// of values that NewCodec checked to be pointer-free and padding-free, so
// that treating their memory as bytes hides nothing from the garbage
// collector and exposes no uninitialised padding.

// bytesOf returns the n bytes of *v as a slice aliasing v.
func bytesOf[T any](v *T, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), n)
}

// store copies *v into b, which holds at least sizeof(T) bytes. When b is
// aligned for T (the usual case: buffers come from the allocator or a
// mapping) a typed copy lets the compiler emit a few vector moves instead
// of a call to memmove; otherwise the copy is byte-wise, which every
// platform accepts.
func store[T any](b []byte, v *T, alignMask uintptr) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)&alignMask == 0 {
		*(*T)(p) = *v
		return
	}
	copy(b, bytesOf(v, int(unsafe.Sizeof(*v))))
}

// load copies b, which holds at least sizeof(T) bytes, into *v; see store.
func load[T any](v *T, b []byte, alignMask uintptr) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)&alignMask == 0 {
		*v = *(*T)(p)
		return
	}
	copy(bytesOf(v, int(unsafe.Sizeof(*v))), b)
}
