package agent

import (
	"context"
	"os"
	"strings"

	"github.com/better-compute/better-compute/kinds"
)

// KexecOutput is boot.kexec's result, posted before the machine leaves the
// ramdisk (under fakehw; on real hardware kexec does not return).
type KexecOutput struct {
	Disk    string `json:"disk"`
	Kernel  string `json:"kernel"`
	Cmdline string `json:"cmdline"`
}

// kexec is boot.kexec: find the installed OS's kernel on the disk and boot
// into it. Under fakehw the kexec is recorded and the agent stops after
// posting the result; OnKexec lets the emulated machine "boot the OS".
func (a *agent) kexec(ctx context.Context, cmd kinds.Command, _ *tracker) (any, error) {
	var in kinds.KexecInput
	if err := decode(cmd, &in); err != nil {
		return nil, err
	}
	d, err := a.pickDisk(ctx, in.Disk)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "bcd-kexec-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	k, err := locateOS(ctx, d, tmp)
	if err != nil {
		return nil, err
	}
	cmdline := strings.TrimSpace(k.cmdline + " " + consoleArgs(a.cfg.Cmdline))
	a.log.Info("ramdisk: kexec", "disk", d.Name, "cmdline", cmdline)
	a.flushTraces(ctx)
	if err := a.cfg.Disks.Kexec(ctx, k.kernel, k.initrd, cmdline); err != nil {
		return nil, err
	}
	return KexecOutput{Disk: d.Name, Kernel: k.describe, Cmdline: cmdline}, nil
}

// installedOS is where the installed OS's kernel was found.
type installedOS struct {
	kernel, initrd string // local files to load
	cmdline        string // root= and the like
	describe       string // where the kernel came from, for the result
}

// consoleArgs returns the console= parameters of the ramdisk's own command
// line, so the installed OS talks on the same serial console.
func consoleArgs(cmdline string) string {
	var out []string
	for _, w := range splitCmdline(cmdline) {
		if strings.HasPrefix(w, "console=") {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}
