// Package initramfs owns the ramdisk's files: it builds the initramfs whose
// /init is `bcd ramdisk` (a static bcd, the kernel modules a virtual and a
// common real server need, and their modules.dep) next to the kernel of an
// extracted Debian linux-image package, and it checks a ramdisk directory
// before a site agent serves it.
package initramfs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/u-root/u-root/pkg/cpio"

	"github.com/better-compute/better-compute/ramdisk/kmod"
)

// Modules are the drivers the ramdisk loads (with their dependencies):
// virtio for QEMU/KVM machines, Intel e1000/e1000e NICs, AHCI SATA and SCSI
// disks, and NVMe. virtio_rng feeds the kernel's CRNG on a virtual machine
// without RDRAND (QEMU's default CPU under TCG): until it is seeded the
// agent's key, its TLS and even a DHCP transaction id wait.
var Modules = []string{"virtio_pci", "virtio_net", "virtio_blk", "virtio_scsi", "virtio_rng", "e1000", "e1000e",
	"ahci", "libahci", "sd_mod", "nvme", "nvme_core"}

// Config is what Build needs.
type Config struct {
	// PackageRoot is where the kernel package was extracted (dpkg-deb -x):
	// it holds boot/vmlinuz-<release> and lib/modules/<release>/.
	PackageRoot string
	// BCD is a static bcd (CGO_ENABLED=0), the ramdisk's /bin/bcd.
	BCD string
	// Out is the directory Build writes vmlinuz and initrd.img to.
	Out string
	// Modules to include; Modules when nil.
	Modules []string
}

// Result says what Build wrote.
type Result struct {
	Release     string // the kernel release, e.g. 6.1.0-57-amd64
	Modules     int    // module files in the initramfs
	KernelBytes int64
	InitrdBytes int64 // compressed
	CpioBytes   int64 // uncompressed
}

// Build writes Out/vmlinuz (the package's kernel) and Out/initrd.img (a
// zstd-compressed newc cpio archive: /init runs `/bin/bcd ramdisk`). The
// same inputs give the same bytes: entries are sorted, owned by root and
// dated 1970.
func Build(cfg Config) (Result, error) {
	if cfg.Modules == nil {
		cfg.Modules = Modules
	}
	rel, err := release(cfg.PackageRoot)
	if err != nil {
		return Result{}, err
	}
	moddir := filepath.Join(cfg.PackageRoot, "lib", "modules", rel)
	deps, err := kmod.Resolve(moddir, cfg.Modules)
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return Result{}, err
	}
	res := Result{Release: rel, Modules: len(deps)}
	if res.KernelBytes, err = copyFile(filepath.Join(cfg.PackageRoot, "boot", "vmlinuz-"+rel), filepath.Join(cfg.Out, KernelFile)); err != nil {
		return Result{}, err
	}
	if err := CheckKernel(filepath.Join(cfg.Out, KernelFile)); err != nil {
		return Result{}, err
	}
	recs, err := records(cfg.BCD, moddir, "lib/modules/"+rel, deps)
	if err != nil {
		return Result{}, err
	}
	defer closeAll(recs)
	if res.InitrdBytes, res.CpioBytes, err = writeInitrd(filepath.Join(cfg.Out, InitrdFile), recs); err != nil {
		return Result{}, err
	}
	return res, CheckInitrd(filepath.Join(cfg.Out, InitrdFile))
}

// release finds the one kernel release the package holds.
func release(root string) (string, error) {
	ms, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(ms) != 1 {
		return "", fmt.Errorf("want one boot/vmlinuz-<release> under %s (an extracted linux-image package), found %d", root, len(ms))
	}
	return strings.TrimPrefix(filepath.Base(ms[0]), "vmlinuz-"), nil
}

// records lists the archive's entries, sorted by name: the directories,
// /dev/console (the kernel opens it for /init before devtmpfs is mounted),
// /init, /bin/bcd, the modules and their modules.dep.
func records(bcd, moddir, modPrefix string, deps kmod.Deps) ([]cpio.Record, error) {
	var dep bytes.Buffer
	if err := deps.Format(&dep); err != nil {
		return nil, err
	}
	recs := []cpio.Record{
		cpio.CharDev("dev/console", 0o600, 5, 1),
		cpio.StaticFile("init", "#!/bin/bcd ramdisk\n", 0o755),
		cpio.StaticFile(modPrefix+"/modules.dep", dep.String(), 0o644),
		cpio.Directory("tmp", 0o1777),
	}
	dirs := map[string]bool{}
	for _, d := range []string{"dev", "proc", "sys", "run", "etc", "bin", "tmp"} {
		dirs[d] = true
	}
	files := map[string]string{"bin/bcd": bcd}
	for _, f := range deps.Files() {
		files[modPrefix+"/"+f] = filepath.Join(moddir, filepath.FromSlash(f))
	}
	for name, src := range files {
		r, err := fileRecord(name, src)
		if err != nil {
			closeAll(recs)
			return nil, err
		}
		recs = append(recs, r)
	}
	for _, r := range recs {
		for d := path.Dir(r.Name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if d != "tmp" {
			recs = append(recs, cpio.Directory(d, 0o755))
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	for i := range recs {
		recs[i].Ino, recs[i].NLink = uint64(i+1), 1
	}
	return recs, nil
}

// fileRecord is a regular file entry read from src when written.
func fileRecord(name, src string) (cpio.Record, error) {
	f, err := os.Open(src)
	if err != nil {
		return cpio.Record{}, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return cpio.Record{}, fmt.Errorf("%s is not a regular file", src)
	}
	perm := uint64(0o644)
	if st.Mode()&0o111 != 0 {
		perm = 0o755
	}
	return cpio.Record{ReaderAt: f, Info: cpio.Info{Name: name, Mode: cpio.S_IFREG | perm, FileSize: uint64(st.Size())}}, nil
}

func closeAll(recs []cpio.Record) {
	for _, r := range recs {
		if c, ok := r.ReaderAt.(io.Closer); ok {
			c.Close()
		}
	}
}

// writeInitrd writes recs as a zstd-compressed newc archive to path,
// through a temporary file so a failed build leaves no half initramfs.
func writeInitrd(path string, recs []cpio.Record) (compressed, raw int64, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".initrd-*")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	zw, err := zstd.NewWriter(tmp, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return 0, 0, err
	}
	cw := &counter{w: zw}
	w := cpio.Newc.Writer(cw)
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			return 0, 0, fmt.Errorf("write %s into the initramfs: %w", r.Name, err)
		}
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return 0, 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, 0, err
	}
	st, err := tmp.Stat()
	if err != nil {
		return 0, 0, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return 0, 0, err
	}
	return st.Size(), cw.n, os.Rename(tmp.Name(), path)
}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
