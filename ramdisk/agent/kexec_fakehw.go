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
// kernel: the head of the deployed image. 64 KiB names the image as well as
// a MiB did (the kexec record's digest) at a sixteenth of the copying and
// hashing: staging and hashing a MiB was 3.6 ms of each kexec and 9% of an
// emulated rack's CPU in the fleet benchmark at one machine, work a real
// machine does on its own CPU.
const fakeKernelBytes = 64 << 10

// locateOS, under fakehw, takes the head of the deployed image (its first
// fakeKernelBytes) as the "kernel" (so the kexec record's digest names what
// was deployed) and refuses a disk whose head is all zero: nothing was
// deployed there. It copies the head through one small buffer: an emulated
// rack runs every machine's kexec in one process, and fresh buffers a kexec
// cost it more than the copy (page faults).
func locateOS(ctx context.Context, d disk.Disk, tmp string) (installedOS, error) {
	f, err := os.Open(d.Path)
	if err != nil {
		return installedOS{}, errs.Wrap(errs.DriverError, err, "open disk %s", d.Name)
	}
	defer f.Close()
	kernel := filepath.Join(tmp, "vmlinuz")
	out, err := os.OpenFile(kernel, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return installedOS{}, errs.Wrap(errs.Internal, err, "stage the kernel")
	}
	defer out.Close()
	w := &zeroWatch{w: out}
	n, err := io.CopyBuffer(w, io.LimitReader(f, fakeKernelBytes), make([]byte, 16<<10))
	switch {
	case err != nil && n == 0:
		return installedOS{}, errs.Wrap(errs.DriverError, err, "read disk %s", d.Name)
	case !w.data:
		return installedOS{}, errs.New(errs.InvalidState, "disk %s holds no deployed image (its first %d KiB are zero); run deploy.image first", d.Name, fakeKernelBytes>>10)
	case err != nil:
		return installedOS{}, errs.Wrap(errs.Internal, err, "stage the kernel")
	}
	if err := out.Close(); err != nil {
		return installedOS{}, errs.Wrap(errs.Internal, err, "stage the kernel")
	}
	return installedOS{kernel: kernel, cmdline: "root=" + d.Name + " ro", describe: d.Name + ":head"}, ctx.Err()
}

// zeroWatch writes to w and notes whether anything written was not zero.
type zeroWatch struct {
	w    io.Writer
	data bool
}

func (z *zeroWatch) Write(p []byte) (int, error) {
	if !z.data && bytes.Count(p, []byte{0}) != len(p) {
		z.data = true
	}
	return z.w.Write(p)
}
