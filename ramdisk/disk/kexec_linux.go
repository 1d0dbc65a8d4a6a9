//go:build !fakehw

package disk

import (
	"context"
	"os"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
)

// Kexec loads kernel and initrd (local files; initrd may be "") with cmdline
// through kexec_file_load and reboots into them. On success it does not
// return: the running ramdisk is replaced.
func (h Host) Kexec(ctx context.Context, kernel, initrd, cmdline string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k, err := os.Open(kernel)
	if err != nil {
		return errs.Wrap(errs.DriverError, err, "kexec: open kernel")
	}
	defer k.Close()
	initrdFd, flags := -1, 0
	if initrd == "" {
		flags |= unix.KEXEC_FILE_NO_INITRAMFS
	} else {
		i, err := os.Open(initrd)
		if err != nil {
			return errs.Wrap(errs.DriverError, err, "kexec: open initrd")
		}
		defer i.Close()
		initrdFd = int(i.Fd())
	}
	if err := unix.KexecFileLoad(int(k.Fd()), initrdFd, cmdline, flags); err != nil {
		return errs.Wrap(errs.DriverError, err, "kexec_file_load %s (signed kernel required under lockdown)", kernel)
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_KEXEC); err != nil {
		return errs.Wrap(errs.DriverError, err, "reboot into the loaded kernel")
	}
	return errs.New(errs.Internal, "reboot(KEXEC) returned")
}
