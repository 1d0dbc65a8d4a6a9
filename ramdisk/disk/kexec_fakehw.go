//go:build fakehw

package disk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// KexecRecord is what the fakehw Kexec writes to <dir>/kexec.json instead of
// rebooting: the emulated rack reads it to "boot" the installed OS.
type KexecRecord struct {
	Kernel       string    `json:"kernel"`
	KernelSHA256 string    `json:"kernelSha256"`
	Initrd       string    `json:"initrd,omitempty"`
	Cmdline      string    `json:"cmdline"`
	At           time.Time `json:"at"`
}

// Kexec simulates kexec: it checks that kernel and initrd are readable files,
// records the request in h.Dir/kexec.json and returns.
func (h Host) Kexec(ctx context.Context, kernel, initrd, cmdline string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	kf, err := os.Open(kernel)
	if err != nil {
		return errs.Wrap(errs.DriverError, err, "kexec: read kernel")
	}
	defer kf.Close()
	sum := sha256.New()
	if _, err := io.CopyBuffer(sum, kf, make([]byte, 64<<10)); err != nil {
		return errs.Wrap(errs.DriverError, err, "kexec: read kernel")
	}
	if initrd != "" {
		if _, err := os.Stat(initrd); err != nil {
			return errs.Wrap(errs.DriverError, err, "kexec: open initrd")
		}
	}
	rec := KexecRecord{Kernel: kernel, KernelSHA256: hex.EncodeToString(sum.Sum(nil)), Initrd: initrd,
		Cmdline: cmdline, At: time.Now().UTC()}
	b, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(h.Dir, "kexec.json"), append(b, '\n'), 0o600); err != nil {
		return errs.Wrap(errs.DriverError, err, "kexec: record request")
	}
	return nil
}
