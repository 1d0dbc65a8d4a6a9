//go:build fakehw

package agent

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// fakeKernelBytes is how much of a fake disk stands in for the installed
// kernel: the head of the deployed image.
const fakeKernelBytes = 1 << 20

// locateOS, under fakehw, takes the head of the deployed image as the
// "kernel" (so the kexec record's digest names what was deployed) and
// refuses a disk whose head is all zero: nothing was deployed there.
func locateOS(ctx context.Context, d disk.Disk, tmp string) (installedOS, error) {
	f, err := os.Open(d.Path)
	if err != nil {
		return installedOS{}, errs.Wrap(errs.DriverError, err, "open disk %s", d.Name)
	}
	defer f.Close()
	head := make([]byte, fakeKernelBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && n == 0 {
		return installedOS{}, errs.Wrap(errs.DriverError, err, "read disk %s", d.Name)
	}
	head = head[:n]
	if bytes.Count(head, []byte{0}) == len(head) {
		return installedOS{}, errs.New(errs.InvalidState, "disk %s holds no deployed image (its first MiB is zero); run deploy.image first", d.Name)
	}
	kernel := filepath.Join(tmp, "vmlinuz")
	if err := os.WriteFile(kernel, head, 0o600); err != nil {
		return installedOS{}, errs.Wrap(errs.Internal, err, "stage the kernel")
	}
	return installedOS{kernel: kernel, cmdline: "root=" + d.Name + " ro", describe: d.Name + ":head"}, ctx.Err()
}
