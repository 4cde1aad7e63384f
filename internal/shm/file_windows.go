package shm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// OpenFile opens path for reading and writing, or for reading only when
// readOnly is set or the process may not write it; ro reports which. It
// refuses anything that is not a regular file. Every file is opened with
// FILE_SHARE_READ, FILE_SHARE_WRITE and FILE_SHARE_DELETE (os.Open shares
// no deletion), so that other processes may use it at once and a queue's
// retention may delete a cycle file that others still have open: the
// name goes at once or when the last handle closes, the data when the
// last view does.
func OpenFile(path string, readOnly bool) (f *os.File, ro bool, err error) {
	if attrs, err := attributes(path); err != nil {
		return nil, false, err
	} else if attrs&(windows.FILE_ATTRIBUTE_DIRECTORY|windows.FILE_ATTRIBUTE_DEVICE) != 0 {
		return nil, false, fmt.Errorf("%w: %s is not a regular file", ErrForeign, path)
	}
	if !readOnly {
		f, err = openShared(path, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.OPEN_EXISTING)
		if err == nil || !errors.Is(err, os.ErrPermission) && !errors.Is(err, windows.ERROR_WRITE_PROTECT) {
			return f, false, err
		}
	}
	f, err = openShared(path, windows.GENERIC_READ, windows.OPEN_EXISTING)
	return f, true, err
}

func attributes(path string) (uint32, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	a, err := windows.GetFileAttributes(p)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return a, nil
}

// openShared opens or creates path with every sharing flag, not
// inheritable by child processes, and checks it is a disk file.
func openShared(path string, access, disposition uint32) (*os.File, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, access,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, disposition, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if t, err := windows.GetFileType(h); err != nil || t != windows.FILE_TYPE_DISK {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrForeign, path)
	}
	return os.NewFile(uintptr(h), path), nil
}

// FileSize returns f's size without allocating (os.File.Stat does).
func FileSize(f *os.File) (int64, error) {
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &fi); err != nil {
		return 0, &os.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	return int64(fi.FileSizeHigh)<<32 | int64(fi.FileSizeLow), nil
}

// back makes sure the bytes [off, off+n) of f have storage. On Windows
// only a file marked sparse can lack it (NTFS gives every other file its
// clusters when it is extended, and reports a full disk then): clearing
// the mark (FSCTL_SET_SPARSE) makes the file system allocate its holes,
// or fail with a full disk, here rather than at a page fault.
func back(f *os.File, off, n int64, writable bool) error {
	if n <= 0 {
		return nil
	}
	var fi windows.ByHandleFileInformation
	h := windows.Handle(f.Fd())
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return &os.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	if fi.FileAttributes&windows.FILE_ATTRIBUTE_SPARSE_FILE == 0 {
		return nil
	}
	if !writable {
		return fmt.Errorf("%w: %s is a sparse file and is not writable here", ErrSparse, f.Name())
	}
	var clear byte // FILE_SET_SPARSE_BUFFER{SetSparse: FALSE}
	var done uint32
	if err := windows.DeviceIoControl(h, windows.FSCTL_SET_SPARSE, &clear, 1, nil, 0, &done, nil); err != nil {
		return fmt.Errorf("%w: %s is a sparse file: %w", ErrSparse, f.Name(), noSpace(err))
	}
	return nil
}

// Dup returns a second *os.File for f's open file, which closes
// independently of f.
func Dup(f *os.File) (*os.File, error) {
	var h windows.Handle
	self := windows.CurrentProcess()
	if err := windows.DuplicateHandle(self, windows.Handle(f.Fd()), self, &h, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
		return nil, &os.PathError{Op: "DuplicateHandle", Path: f.Name(), Err: err}
	}
	return os.NewFile(uintptr(h), f.Name()), nil
}

// CopyOwner does nothing on Windows: a new file inherits its directory's
// access control list.
func CopyOwner(string, os.FileInfo) {}

// AddressSpaceLimit describes the process's limit on address space, for
// errors about failed reservations: 128 TiB for a 64-bit process, less
// what the system's commit limit allows for page tables.
func AddressSpaceLimit() string { return "a 64-bit Windows process has 128 TiB of address space" }

// allocated reports whether every byte of f has storage: NTFS gives every
// file its clusters but one marked sparse.
func allocated(f *os.File) bool {
	var fi windows.ByHandleFileInformation
	if windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &fi) != nil {
		return false
	}
	return fi.FileAttributes&windows.FILE_ATTRIBUTE_SPARSE_FILE == 0
}

// removedPrefix starts the name Remove moves a file to before deleting
// it.
const removedPrefix = ".offmap-removed-"

// Remove removes the name path, which other processes may have open and
// mapped: they keep the file until they close it. Windows keeps the name
// of a file deleted while open until its last handle closes, and refuses
// to open or create a file of that name meanwhile (a queue would go on
// listing a cycle that retention deleted, and could not make it again);
// so the file is first moved to a hidden name of its own in the same
// folder (allowed, as every handle shares deletion), then deleted there.
// Names left by a process that died between the two are deleted by the
// next Remove in the folder, once no process has them open.
func Remove(path string) error {
	dir, base := filepath.Split(path)
	var rnd [8]byte
	rand.Read(rnd[:])
	hidden := filepath.Join(dir, removedPrefix+base+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Rename(path, hidden); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = &os.PathError{Op: "remove", Path: path, Err: le.Err}
		}
		return err
	}
	err := os.Remove(hidden)
	left, _ := filepath.Glob(filepath.Join(dir, removedPrefix+"*"))
	for _, l := range left {
		if l != hidden {
			os.Remove(l) // fails while another process has it open
		}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return &os.PathError{Op: "remove", Path: path, Err: errors.Unwrap(err)}
	}
	return nil
}

// IsNamed reports whether path names f's file, and not one put in its
// place since f was opened. (os.SameFile of os.Stat's result opens path
// sharing nothing, which Wine refuses for a file with a writable view:
// the files then never compare equal.)
func IsNamed(f *os.File, path string) bool {
	g, err := openShared(path, 0, windows.OPEN_EXISTING)
	if err != nil {
		return false
	}
	defer g.Close()
	var a, b windows.ByHandleFileInformation
	return windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &a) == nil &&
		windows.GetFileInformationByHandle(windows.Handle(g.Fd()), &b) == nil &&
		a.VolumeSerialNumber == b.VolumeSerialNumber && a.FileIndexHigh == b.FileIndexHigh && a.FileIndexLow == b.FileIndexLow
}

// Replace renames from to path, in place of the file that open, holding
// its lock, has open; open is closed first, as a file that is open is not
// replaced (Wine refuses it). Another
// process may take the lock in between: as it does when it opened path
// before the rename on Unix, it then holds a file no longer at path.
func Replace(from, path string, open *os.File) error {
	open.Close()
	return os.Rename(from, path)
}
