package pid1

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/ramdisk/kmod"
)

// mountAll mounts the kernel's file systems and the ramdisk's tmpfs.
func mountAll() error {
	for _, m := range []struct{ dir, fstype, data string }{
		{"/proc", "proc", ""}, {"/sys", "sysfs", ""}, {"/dev", "devtmpfs", "mode=0755"},
		{"/run", "tmpfs", "mode=0755"}, {"/tmp", "tmpfs", "mode=1777"},
	} {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fstype, m.dir, m.fstype, unix.MS_NOSUID, m.data); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dir, err)
		}
	}
	// If /init itself dies (a Go panic), the kernel panics: make that a
	// reboot after 10s rather than a machine stopped for good.
	return os.WriteFile("/proc/sys/kernel/panic", []byte("10\n"), 0o644)
}

// loadModules loads /lib/modules/<release>/modules.dep's modules.
func loadModules() (release string, n int, errs []error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", 0, []error{err}
	}
	release = unix.ByteSliceToString(u.Release[:])
	n, errs = kmod.Load(filepath.Join("/lib/modules", release))
	return release, n, errs
}

func readCmdline() (string, error) {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return "", fmt.Errorf("read the kernel command line: %w", err)
	}
	return string(b), nil
}

// reboot restarts the machine (PID 1 may not exit: the kernel would panic).
func reboot() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}
