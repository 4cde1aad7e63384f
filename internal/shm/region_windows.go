package shm

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Region on Windows: the range is a placeholder (VirtualAlloc2,
// MEM_RESERVE_PLACEHOLDER), and each Extend splits off the part it needs
// and maps the file into it (MapViewOfFile3, MEM_REPLACE_PLACEHOLDER),
// one view per Extend, so that what is mapped never moves. A view starts
// at a multiple of the allocation granularity (64 KiB), in the file and
// in memory; so a writer pads the file with zeros to the next multiple
// before it maps, and the mapped end always lies on one. A process that
// may only read a file whose mapped end does not (a file made on another
// system) cannot map more of it: Extend says so, and reopening maps it
// whole.
type Region struct {
	base     uintptr
	reserved int // as asked for
	space    int // reserved, rounded up to the allocation granularity
	mapped   int
	writable bool
	views    []uintptr      // the views' addresses, in order
	tail     uintptr        // the last view's, if ExtendTail mapped it outside a placeholder
	file     windows.Handle // of the last Extend, for Sync
	zeroed   int            // bytes of private zero pages Release left at base
}

// errUnalignedEnd is returned by Extend when the mapped end of a file
// opened read-only is not on a 64 KiB boundary.
var errUnalignedEnd = errors.New("the mapped end is not a multiple of 64 KiB (a file made on another system, opened read-only here): reopen it to map its growth")

// Reserve reserves size bytes of address space, a multiple of the page
// size.
func Reserve(size int) (*Region, error) {
	if size <= 0 || size%os.Getpagesize() != 0 {
		return nil, fmt.Errorf("shm: reserve %d bytes: not a positive multiple of the page size", size)
	}
	space := Pad(size, allocationGranularity)
	p, err := virtualAlloc2(0, space, memReserve|memReservePlaceholder, pageNoAccess)
	if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		return nil, fmt.Errorf("shm: reserve %d bytes of address space: %w: VirtualAlloc2: %w", size, ErrNoPlaceholders, err)
	}
	if err != nil {
		return nil, fmt.Errorf("shm: reserve %d bytes of address space: %w", size, err)
	}
	return &Region{base: p, reserved: size, space: space}, nil
}

// Extend maps the bytes [Len(), size) of f behind the mapped prefix and
// returns the whole prefix, which may be longer than size: a writer maps
// up to the next 64 KiB boundary, padding the file with zeros to it. For
// a reader it may also be shorter, when part of [Len(), size) is claimed
// space no writer has mapped yet (see below).
// size is a multiple of the page size, at most the reserved size; the
// file must hold all of it but the rest of its last page. Concurrent
// calls on one Region must be serialised by the caller.
func (r *Region) Extend(f *os.File, size int, writable bool) ([]byte, error) {
	page := os.Getpagesize()
	switch {
	case r.base == 0 || r.zeroed > 0:
		return nil, fmt.Errorf("shm: extend %s: region is unmapped", f.Name())
	case size%page != 0 || size > r.reserved:
		return nil, fmt.Errorf("shm: extend %s to %d bytes: outside the %d-byte reservation", f.Name(), size, r.reserved)
	case r.mapped > 0 && writable != r.writable:
		return nil, fmt.Errorf("shm: extend %s: cannot change protection", f.Name())
	}
	if size <= r.mapped {
		return r.Bytes(), nil
	}
	if r.mapped%allocationGranularity != 0 {
		return nil, fmt.Errorf("shm: extend %s to %d bytes: %w", f.Name(), size, errUnalignedEnd)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fileSize := st.Size()
	if int64(size) >= fileSize+int64(page) {
		return nil, fmt.Errorf("shm: extend %s to %d bytes: the file has %d", f.Name(), size, fileSize)
	}
	// The view ends on a 64 KiB boundary, or at the end of the
	// reservation, so that the next Extend can map on from there: a
	// writer pads the file to the next one; a reader maps up to the last
	// one the file holds. Every byte a writer publishes lies below a
	// boundary the file holds, as the writer padded the file before it
	// wrote there; so a reader that gets less than size only misses bytes
	// nobody has published yet (space claimed by a writer that has not
	// mapped it), and returns what it has. Only a first view of a file
	// made elsewhere ends elsewhere.
	if g := int64(min(Pad(size, allocationGranularity), r.reserved)); writable && fileSize < g {
		if err := extendZeroed(f, g); err != nil {
			return nil, err
		}
		fileSize = g
	}
	held := int(fileSize / allocationGranularity * allocationGranularity)
	if fileSize >= int64(r.reserved) {
		held = r.reserved
	}
	end := size
	switch {
	case held >= size:
		end = held
	case r.mapped == 0:
		// A first view: all of size, wherever it ends.
	case held > r.mapped:
		end = held
	default:
		return r.Bytes(), nil
	}
	inFile := min(int64(end), fileSize) // the view's end in the file
	if err := back(f, int64(r.mapped), inFile-int64(r.mapped), writable); err != nil {
		return nil, err
	}
	section, err := newSection(f, inFile, writable)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(section)
	at := r.base + uintptr(r.mapped)
	// The view takes the rest of the placeholder, or the part split off
	// its front (a placeholder is replaced whole: splitting one at its
	// own size is refused).
	if end < r.space {
		err = splitPlaceholder(at, end-r.mapped)
	}
	if err != nil {
		return nil, fmt.Errorf("shm: extend %s: split the reservation at %d: %w", f.Name(), end, err)
	}
	prot := uint32(pageReadOnly)
	if writable {
		prot = pageReadWrite
	}
	if _, err := mapViewOfFile3(section, at, int64(r.mapped), end-r.mapped, prot); err != nil {
		return nil, fmt.Errorf("MapViewOfFile3 %s [%d, %d): %w", f.Name(), r.mapped, end, err)
	}
	r.views = append(r.views, at)
	r.mapped, r.writable, r.file = end, writable, windows.Handle(f.Fd())
	return r.Bytes(), nil
}

// growZeroed is Grow on Windows. Past the file's end it extends the file
// to the next 64 KiB boundary in one step, under the growth lock, where
// writing zeros up to off+n alone would leave the end between two
// boundaries until the claimant's Extend padded it: a reader that looked
// then could not tell the file from one made elsewhere, mapped its tail
// as its last view (ExtendTail), and could map no growth after it. The
// zeros past off+n are written before anyone can have written there: a
// writer maps, and so writes, only what the file holds.
func growZeroed(f *os.File, off, n int64) error {
	if err := lockGrowth(f); err != nil {
		return err
	}
	defer unlockGrowth(f)
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size, end := st.Size(), off+n
	if in := min(end, size); in > off {
		if err := writeZeros(f, off, in-off); err != nil {
			return err
		}
	}
	if end <= size {
		return nil
	}
	return writeZeros(f, size, Pad(end, allocationGranularity)-size)
}

// ExtendTail maps the rest of f read-only, up to its end, for a reader
// that met data past what Extend gave it: a file whose end lies between
// 64 KiB boundaries, which no writer here padded, so made on another
// system (Linux extends a file to its last claim). A view in a
// placeholder is whole pages within the file, so this one is not in a
// placeholder: the placeholder's part it needs is freed and the view
// mapped at the same address (MapViewOfFileEx), which keeps it where the
// prefix ends unless another thread of the process allocates memory there
// in between (then it fails, and nothing is mapped). It is the region's
// last view: growth after it is mapped only by reopening.
func (r *Region) ExtendTail(f *os.File) ([]byte, error) {
	switch {
	case r.base == 0 || r.zeroed > 0:
		return nil, fmt.Errorf("shm: extend %s: region is unmapped", f.Name())
	case r.mapped > 0 && r.writable:
		return nil, fmt.Errorf("shm: extend %s: cannot change protection", f.Name())
	case r.mapped%allocationGranularity != 0:
		return r.Bytes(), nil // the last view is mapped
	}
	fileSize, err := FileSize(f)
	if err != nil {
		return nil, err
	}
	end := int(min(fileSize, int64(r.reserved)))
	if end <= r.mapped {
		return r.Bytes(), nil
	}
	if end%allocationGranularity == 0 {
		return r.Extend(f, end, false)
	}
	section, err := newSection(f, int64(end), false)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(section)
	at := r.base + uintptr(r.mapped)
	span := Pad(end-r.mapped, allocationGranularity)
	if r.mapped+span < r.space {
		if err := splitPlaceholder(at, span); err != nil {
			return nil, fmt.Errorf("shm: extend %s: split the reservation at %d: %w", f.Name(), r.mapped+span, err)
		}
	}
	if err := windows.VirtualFree(at, 0, memRelease); err != nil {
		return nil, fmt.Errorf("shm: extend %s: free [%d, %d) of the reservation: %w", f.Name(), r.mapped, r.mapped+span, err)
	}
	v, err := mapViewOfFileEx(section, windows.FILE_MAP_READ, int64(r.mapped), end-r.mapped, at)
	if err != nil || v != at {
		if err == nil {
			windows.UnmapViewOfFile(v)
			err = errors.New("mapped elsewhere")
		}
		virtualAlloc2(at, span, memReserve|memReservePlaceholder, pageNoAccess) // back as it was, if the addresses are still free
		return nil, fmt.Errorf("shm: extend %s to its end, %d bytes: MapViewOfFileEx: %w", f.Name(), end, err)
	}
	r.views = append(r.views, at)
	r.tail = at
	r.mapped, r.file = end, windows.Handle(f.Fd())
	return r.Bytes(), nil
}

// Bytes returns the mapped prefix.
func (r *Region) Bytes() []byte {
	if r.base == 0 || r.mapped == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(pointer(r.base)), r.mapped)
}

// Len returns the size of the mapped prefix.
func (r *Region) Len() int { return r.mapped }

// Sync writes the mapped prefix's dirty pages to the file and waits.
func (r *Region) Sync() error {
	if r.mapped == 0 || !r.writable {
		return nil
	}
	for i, v := range r.views {
		end := r.base + uintptr(r.mapped)
		if i+1 < len(r.views) {
			end = r.views[i+1]
		}
		if err := windows.FlushViewOfFile(v, end-v); err != nil {
			return err
		}
	}
	return windows.FlushFileBuffers(r.file)
}

// Release detaches the mapped prefix from the file but keeps its
// addresses, filled with private zero pages where the system can commit
// them (else left inaccessible): a stale pointer into it reads zeros and
// writes nowhere, and the addresses are never reused. The reserved rest is
// given back.
func (r *Region) Release() error {
	if r.base == 0 || r.zeroed > 0 {
		return nil
	}
	var err error
	if r.tail != 0 {
		// Not in a placeholder: make it one again, where the addresses
		// are still free.
		span := Pad(r.mapped, allocationGranularity) - int(r.tail-r.base)
		if uerr := windows.UnmapViewOfFile(r.tail); uerr != nil {
			err = uerr
		} else if _, aerr := virtualAlloc2(r.tail, span, memReserve|memReservePlaceholder, pageNoAccess); aerr != nil {
			err = aerr
		}
		if err != nil {
			r.views, r.tail, r.base, r.mapped = nil, 0, 0, 0 // nothing more can be done with the range
			return err
		}
		r.mapped = Pad(r.mapped, allocationGranularity)
	}
	for _, v := range r.views {
		if v == r.tail {
			continue // a placeholder again
		}
		if uerr := unmapToPlaceholder(v); uerr != nil && err == nil {
			err = uerr
		}
	}
	if r.space > r.mapped {
		if ferr := windows.VirtualFree(r.base+uintptr(r.mapped), 0, memRelease); ferr != nil && err == nil {
			err = ferr
		}
	}
	if r.mapped > 0 && err == nil {
		if len(r.views) > 1 {
			err = windows.VirtualFree(r.base, uintptr(r.mapped), memRelease|memCoalescePlaceholders)
		}
		if err == nil {
			if _, cerr := virtualAlloc2(r.base, r.mapped, memReserve|memCommit|memReplacePlaceholder, pageReadWrite); cerr == nil {
				r.zeroed = r.mapped
			}
		}
	}
	if r.zeroed == 0 {
		r.zeroed = -1 // a placeholder of r.mapped bytes is left at base
	}
	r.views, r.tail, r.space, r.reserved, r.mapped = nil, 0, r.mapped, r.mapped, 0
	return err
}

// Unmap releases the whole range; no pointer into it may be used
// afterwards.
func (r *Region) Unmap() error {
	if r.base == 0 {
		return nil
	}
	var err error
	if r.zeroed != 0 {
		err = windows.VirtualFree(r.base, 0, memRelease)
	} else {
		for _, v := range r.views {
			if uerr := windows.UnmapViewOfFile(v); uerr != nil && err == nil {
				err = uerr
			}
		}
		if end := Pad(r.mapped, allocationGranularity); r.space > end {
			if ferr := windows.VirtualFree(r.base+uintptr(end), 0, memRelease); ferr != nil && err == nil {
				err = ferr
			}
		}
	}
	r.base, r.mapped, r.views = 0, 0, nil
	return err
}
