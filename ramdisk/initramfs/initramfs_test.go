package initramfs

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/u-root/u-root/pkg/cpio"
	"github.com/ulikunitz/xz"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ramdisk/kmod"
)

// bzImage is the start of an x86 kernel image: the boot flag and "HdrS".
func bzImage() []byte {
	b := make([]byte, 4096)
	b[0x1FE], b[0x1FF] = 0x55, 0xAA
	copy(b[0x202:], "HdrS")
	return b
}

func compress(t *testing.T, kind string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch kind {
	case "zstd":
		w, err = zstd.NewWriter(&buf)
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "xz":
		w, err = xz.NewWriter(&buf)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCheckDir(t *testing.T) {
	t.Parallel()
	archive := append([]byte("070701"), bytes.Repeat([]byte("0"), 200)...)
	notKernel := bzImage()
	copy(notKernel[0x202:], "HdrX")
	for _, tt := range []struct {
		name           string
		kernel, initrd []byte // nil: the file is missing
		want           string // "" for no error, else a word of the message
	}{
		{"zstd", bzImage(), compress(t, "zstd", archive), ""},
		{"gzip", bzImage(), compress(t, "gzip", archive), ""},
		{"xz", bzImage(), compress(t, "xz", archive), ""},
		{"plain cpio", bzImage(), archive, ""},
		{"no kernel", nil, archive, KernelFile + " does not exist"},
		{"no initrd", bzImage(), nil, InitrdFile + " does not exist"},
		{"kernel without HdrS", notKernel, archive, KernelFile + " is not a Linux kernel"},
		{"short kernel", bzImage()[:0x203], archive, KernelFile + " is not a Linux kernel"},
		{"empty initrd", bzImage(), []byte{}, InitrdFile + " is not an initramfs"},
		{"zstd of something else", bzImage(), compress(t, "zstd", []byte("#!/bin/sh\necho hello\n")), InitrdFile + " is not an initramfs"},
		{"truncated gzip", bzImage(), compress(t, "gzip", archive)[:8], InitrdFile + " is not an initramfs"},
		{"a kernel as initrd", bzImage(), bzImage(), InitrdFile + " is not an initramfs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range map[string][]byte{KernelFile: tt.kernel, InitrdFile: tt.initrd} {
				if b != nil {
					if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := CheckDir(dir)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckDir() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "./run ramdisk") ||
				errs.KindOf(err) != errs.InvalidInput {
				t.Errorf("CheckDir() = %v, want INVALID_INPUT containing %q and the fix (./run ramdisk)", err, tt.want)
			}
		})
	}
}

// TestInitrdArchive writes an initramfs from fake module files and reads it
// back: /init runs bcd ramdisk, /dev/console exists before devtmpfs, every
// parent directory comes before its entries, nothing carries a date or an
// owner, and the same inputs give the same bytes.
func TestInitrdArchive(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	bcd := filepath.Join(src, "bcd")
	if err := os.WriteFile(bcd, []byte("\x7fELF static bcd"), 0o755); err != nil {
		t.Fatal(err)
	}
	moddir := filepath.Join(src, "modules")
	deps := kmod.Deps{"kernel/drivers/virtio/virtio.ko": {}, "kernel/drivers/block/virtio_blk.ko": {"kernel/drivers/virtio/virtio.ko"}}
	for f := range deps {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(moddir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(moddir, f), []byte("module "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var outs [][]byte
	for i := range 2 {
		recs, err := records(bcd, moddir, "lib/modules/6.1.0-test", deps)
		if err != nil {
			t.Fatalf("records() = %v", err)
		}
		path := filepath.Join(t.TempDir(), InitrdFile)
		if _, _, err := writeInitrd(path, recs); err != nil {
			t.Fatalf("writeInitrd() = %v", err)
		}
		closeAll(recs)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
		if i == 0 {
			checkArchive(t, b)
		}
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("two builds from the same inputs differ (%d and %d bytes)", len(outs[0]), len(outs[1]))
	}
}

func checkArchive(t *testing.T, b []byte) {
	t.Helper()
	zr, err := zstd.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the initrd is not zstd: %v", err)
	}
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(raw)))
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("the initrd is not a newc archive: %v", err)
	}
	seen := map[string]cpio.Record{}
	for _, r := range recs {
		if dir := filepath.Dir(r.Name); dir != "." && seen[dir].Mode&cpio.S_IFMT != cpio.S_IFDIR {
			t.Errorf("%s comes before its directory %s", r.Name, dir)
		}
		if r.MTime != 0 || r.UID != 0 || r.GID != 0 {
			t.Errorf("%s: mtime %d uid %d gid %d, want 0 0 0", r.Name, r.MTime, r.UID, r.GID)
		}
		seen[r.Name] = r
	}
	content := func(name string) string {
		r := seen[name]
		b, _ := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
		return string(b)
	}
	if got := content("init"); got != "#!/bin/bcd ramdisk\n" || seen["init"].Mode&0o111 == 0 {
		t.Errorf("init = %q mode %o, want an executable \"#!/bin/bcd ramdisk\"", got, seen["init"].Mode)
	}
	if c := seen["dev/console"]; c.Mode&cpio.S_IFMT != cpio.S_IFCHR || c.Rmajor != 5 || c.Rminor != 1 {
		t.Errorf("dev/console = mode %o %d:%d, want the character device 5:1", c.Mode, c.Rmajor, c.Rminor)
	}
	if got := content("bin/bcd"); got != "\x7fELF static bcd" || seen["bin/bcd"].Mode&0o111 == 0 {
		t.Errorf("bin/bcd = %q mode %o, want the executable bcd", got, seen["bin/bcd"].Mode)
	}
	want := "kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio.ko:\n"
	if got := content("lib/modules/6.1.0-test/modules.dep"); got != want {
		t.Errorf("modules.dep = %q, want %q", got, want)
	}
	if got := content("lib/modules/6.1.0-test/kernel/drivers/virtio/virtio.ko"); got != "module kernel/drivers/virtio/virtio.ko" {
		t.Errorf("virtio.ko = %q, want the module file", got)
	}
	for _, d := range []string{"proc", "sys", "run", "tmp", "etc"} {
		if seen[d].Mode&cpio.S_IFMT != cpio.S_IFDIR {
			t.Errorf("%s is not a directory in the archive", d)
		}
	}
}

// FuzzCpioStart: whatever a ramdisk file starts with, reading the archive
// magic through its compression never panics.
func FuzzCpioStart(f *testing.F) {
	f.Add([]byte("070701000000"))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0})
	f.Add([]byte{0xfd, '7', 'z', 'X', 'Z', 0, 0, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = cpioStart(b)
	})
}
