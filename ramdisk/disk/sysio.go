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

func (t *target) Close() error { return t.f.Close() }

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
