package initramfs

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/better-compute/better-compute/errs"
)

// The files a ramdisk directory holds, as `bcd site` serves them under /ramdisk/.
const (
	KernelFile = "vmlinuz"
	InitrdFile = "initrd.img"
)

const fix = "build them with `./run ramdisk` (task ramdisk) and start bcd site with --ramdisk-dir build/ramdisk"

// CheckDir checks that dir holds a Linux kernel and an initramfs: the
// kernel's bzImage header, and an initramfs that is a newc cpio archive,
// plain or compressed with zstd, gzip or xz. A missing or corrupt file is
// INVALID_INPUT naming it and the fix.
func CheckDir(dir string) error {
	if err := CheckKernel(filepath.Join(dir, KernelFile)); err != nil {
		return err
	}
	return CheckInitrd(filepath.Join(dir, InitrdFile))
}

// CheckKernel checks that path is an x86 bzImage: the boot sector's 0x55AA
// at 0x1FE and the setup header's "HdrS" at 0x202.
func CheckKernel(path string) error {
	b, err := head(path, 0x206)
	if err != nil {
		return err
	}
	if len(b) < 0x206 || b[0x1FE] != 0x55 || b[0x1FF] != 0xAA || string(b[0x202:0x206]) != "HdrS" {
		return errs.Invalid("ramdisk", "%s is not a Linux kernel (no bzImage header); %s", path, fix)
	}
	return nil
}

// CheckInitrd checks that path starts a newc cpio archive, plain or
// compressed with a format the kernel decompresses (zstd, gzip, xz).
func CheckInitrd(path string) error {
	b, err := head(path, 1<<20) // a zstd block or xz chunk is smaller: the first one is whole
	if err != nil {
		return err
	}
	start, err := cpioStart(b)
	if err != nil || !bytes.HasPrefix(start, []byte("07070")) {
		return errs.Invalid("ramdisk", "%s is not an initramfs (a newc cpio archive, plain or zstd, gzip or xz compressed); %s", path, fix)
	}
	return nil
}

// cpioStart returns the first bytes of the archive inside b's compression.
func cpioStart(b []byte) ([]byte, error) {
	var r io.Reader
	var err error
	switch {
	case bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		var d *zstd.Decoder
		if d, err = zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1)); err == nil {
			defer d.Close()
			r = d
		}
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		r, err = gzip.NewReader(bytes.NewReader(b))
	case bytes.HasPrefix(b, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		r, err = xz.NewReader(bytes.NewReader(b))
	default:
		r = bytes.NewReader(b)
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, 6)
	_, err = io.ReadFull(r, out)
	return out, err
}

// head reads up to n bytes of path; a missing file is INVALID_INPUT naming it.
func head(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Invalid("ramdisk", "%s does not exist; %s", path, fix)
	}
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "cannot read %s", path)
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, errs.Wrap(errs.InvalidInput, err, "cannot read %s", path)
	}
	return b[:m], nil
}
