//go:build !fakehw

package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// locateOS mounts each partition of d read-only and takes the first that
// holds boot/vmlinuz (the Debian/Ubuntu/Fedora symlink) as the root
// filesystem: its kernel and initrd are copied to tmp, and root= names the
// partition by PARTUUID when it has one. An image with a separate /boot
// partition is UNSUPPORTED for now.
func locateOS(ctx context.Context, d disk.Disk, tmp string) (installedOS, error) {
	dev, err := filepath.EvalSymlinks(d.Path)
	if err != nil {
		return installedOS{}, errs.Wrap(errs.DriverError, err, "resolve disk %s", d.Name)
	}
	kname := filepath.Base(dev)
	parts, _ := filepath.Glob(filepath.Join("/sys/class/block", kname, kname+"*", "partition"))
	mnt := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return installedOS{}, errs.Wrap(errs.Internal, err, "make a mount point")
	}
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return installedOS{}, err
		}
		part := "/dev/" + filepath.Base(filepath.Dir(p))
		if k, ok, err := tryPartition(part, mnt, tmp); ok || err != nil {
			return k, err
		}
	}
	return installedOS{}, errs.New(errs.Unsupported,
		"no partition of disk %s holds boot/vmlinuz on an ext4, xfs or btrfs root; images with a separate /boot are not supported by boot.kexec yet", d.Name)
}

// tryPartition mounts part on mnt and, when it holds boot/vmlinuz, stages
// the kernel and initrd in tmp.
func tryPartition(part, mnt, tmp string) (installedOS, bool, error) {
	mounted := false
	for _, fs := range []string{"ext4", "xfs", "btrfs"} { // the root filesystems tried, in order
		if unix.Mount(part, mnt, fs, unix.MS_RDONLY, "") == nil {
			mounted = true
			break
		}
	}
	if !mounted {
		return installedOS{}, false, nil
	}
	defer unix.Unmount(mnt, 0)
	kernel := filepath.Join(mnt, "boot/vmlinuz")
	if _, err := os.Stat(kernel); err != nil {
		return installedOS{}, false, nil
	}
	k := installedOS{kernel: filepath.Join(tmp, "vmlinuz"), describe: part + ":/boot/vmlinuz"}
	if err := copyFile(kernel, k.kernel); err != nil {
		return installedOS{}, false, err
	}
	if initrd := filepath.Join(mnt, "boot/initrd.img"); fileExists(initrd) {
		k.initrd = filepath.Join(tmp, "initrd.img")
		if err := copyFile(initrd, k.initrd); err != nil {
			return installedOS{}, false, err
		}
	}
	k.cmdline = "root=" + part + " ro"
	if id := partUUID(part); id != "" {
		k.cmdline = "root=PARTUUID=" + id + " ro"
	}
	return k, true, nil
}

// partUUID finds part's PARTUUID through /dev/disk/by-partuuid.
func partUUID(part string) string {
	links, _ := filepath.Glob("/dev/disk/by-partuuid/*")
	for _, l := range links {
		if t, err := filepath.EvalSymlinks(l); err == nil && t == part {
			return strings.ToLower(filepath.Base(l))
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return errs.Wrap(errs.DriverError, err, "read %s", from)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "stage %s", to)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return errs.Wrap(errs.DriverError, err, "copy %s", from)
	}
	return out.Close()
}
