package disk

import (
	"errors"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
)

// target is an open disk: a block device or the backing file of a fake disk.
type target struct {
	f     *os.File
	name  string
	size  int64
	isDev bool
	// direct is the same disk opened with O_DIRECT (see openDirect), or nil.
	// Only the goroutine that writes the image uses it.
	direct *os.File
}

// dioAlign is the alignment of the offset, length and buffer of a direct
// write or read: the page size, and the logical block of 4Kn disks.
const dioAlign = 4096

// alignedBuf returns n bytes that start at a dioAlign boundary, so that they
// can be the buffer of a direct write or read.
func alignedBuf(n int) []byte {
	b := make([]byte, n+dioAlign)
	skip := (dioAlign - int(uintptr(unsafe.Pointer(&b[0]))%dioAlign)) % dioAlign
	return b[skip : skip+n : skip+n]
}

// openDirect opens the disk a second time with O_DIRECT, for the image
// writer: an aligned write then goes from its buffer to the disk, instead of
// being copied into the page cache and written back at the next fdatasync
// (on the 2-core bench machine the copy alone cost 0.5 to 2 s of CPU per GiB;
// direct, 0.05 s). A file system that refuses O_DIRECT leaves t buffered.
// fdatasync through t.f still makes direct writes durable: it commits the
// file's metadata and flushes the device's cache for the whole inode.
func (t *target) openDirect() {
	if f, err := os.OpenFile(t.f.Name(), os.O_RDWR|unix.O_DIRECT, 0); err == nil {
		t.direct = f
	}
}

// directOK reports whether p at off can be written or read with O_DIRECT.
func directOK(p []byte, off int64) bool {
	return len(p) > 0 && off%dioAlign == 0 && len(p)%dioAlign == 0 && uintptr(unsafe.Pointer(&p[0]))%dioAlign == 0
}

// WriteAt writes p at off, direct when it is aligned (the tail of an image
// that is not a multiple of 4 KiB goes through the page cache).
func (t *target) WriteAt(p []byte, off int64) (int, error) {
	if t.direct != nil && directOK(p, off) {
		n, err := t.direct.WriteAt(p, off)
		if n > 0 || !errors.Is(err, unix.EINVAL) {
			return n, err
		}
		t.noDirect() // a device whose logical block is over 4 KiB: buffered from now on
	}
	return t.f.WriteAt(p, off)
}

// ReadAt reads p at off, direct when aligned, so that a resumed write reads
// what is on the disk without filling the page cache.
func (t *target) ReadAt(p []byte, off int64) (int, error) {
	if t.direct != nil && directOK(p, off) {
		n, err := t.direct.ReadAt(p, off)
		if n > 0 || !errors.Is(err, unix.EINVAL) {
			return n, err
		}
		t.noDirect()
	}
	return t.f.ReadAt(p, off)
}

func (t *target) noDirect() {
	t.direct.Close()
	t.direct = nil
}

// openTarget opens d.Path read-write and learns its real size and kind.
func openTarget(d Disk) (*target, error) {
	if d.Path == "" {
		return nil, errs.Invalid("disk.path", "disk %s has no device path", d.Name)
	}
	f, err := os.OpenFile(d.Path, os.O_RDWR, 0)
	if err != nil {
		return nil, errs.Wrap(errs.DriverError, err, "open disk %s", d.Name)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, errs.Wrap(errs.DriverError, err, "stat disk %s", d.Name)
	}
	t := &target{f: f, name: d.Name}
	switch {
	case st.Mode().IsRegular():
		t.size = st.Size()
	case st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0:
		t.isDev = true
		if t.size, err = f.Seek(0, io.SeekEnd); err != nil {
			f.Close()
			return nil, errs.Wrap(errs.DriverError, err, "size of disk %s", d.Name)
		}
	default:
		f.Close()
		return nil, errs.New(errs.Unsupported, "disk %s: %s is neither a block device nor a file", d.Name, d.Path)
	}
	return t, nil
}

func (t *target) Close() error {
	if t.direct != nil {
		t.direct.Close()
	}
	return t.f.Close()
}

// punch makes [off, off+n) read as zeros without writing them: a hole in a
// file; on a block device the kernel's zero-out without fallback (WRITE
// ZEROES with unmap), which fails with EOPNOTSUPP when the device cannot.
func (t *target) punch(off, n int64) error {
	if n <= 0 {
		return nil
	}
	return unix.Fallocate(int(t.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// zeroRange makes [off, off+n) read as zeros by the cheapest means that is
// sure: punch; on a device that cannot, BLKZEROOUT (which may write zeros).
func (t *target) zeroRange(off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := t.punch(off, n)
	if err == nil || !t.isDev || !(errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
		return err
	}
	return t.blkZeroOut(off, n)
}

// blkZeroOut issues BLKZEROOUT for [off, off+n); both must be 512-aligned.
func (t *target) blkZeroOut(off, n int64) error {
	r := [2]uint64{uint64(off), uint64(n)}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, t.f.Fd(), unix.BLKZEROOUT, uintptr(unsafe.Pointer(&r)))
	if e != 0 {
		return e
	}
	return nil
}

// nextData returns the start of the next data extent at or after off, or
// (size, false) when only a hole remains. Devices have no holes.
func (t *target) nextData(off int64) (int64, bool, error) {
	if !t.isDev {
		o, err := unix.Seek(int(t.f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return t.size, false, nil
		}
		return o, err == nil, err
	}
	return off, off < t.size, nil
}

// nextHole returns the start of the next hole at or after off (size at the end).
func (t *target) nextHole(off int64) (int64, error) {
	if !t.isDev {
		o, err := unix.Seek(int(t.f.Fd()), off, unix.SEEK_HOLE)
		if errors.Is(err, unix.ENXIO) {
			return t.size, nil
		}
		return min(o, t.size), err
	}
	return t.size, nil
}

// allocatedBytes is st_blocks*512 of a file (0 for devices): how much of a
// fake disk really holds data.
func allocatedBytes(path string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, nil
	}
	return st.Blocks * 512, nil
}
