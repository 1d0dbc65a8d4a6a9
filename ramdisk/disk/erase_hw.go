package disk

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// runner runs a tool of the ramdisk (hdparm, nvme) and returns its output.
type runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// execRunner runs real processes.
type execRunner struct{}

func (execRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(name); err != nil {
		return nil, errs.Wrap(errs.Unsupported, err, "%s is not installed in the ramdisk", name)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), errs.Wrap(errs.DriverError, err, "%s %s: %s", name, args[0], lastLine(out.String()))
	}
	return out.Bytes(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func isNVMe(path string) bool { return strings.HasPrefix(filepath.Base(path), "nvme") }

// hwErase runs the drive's own erase: NVMe Format NVM with Secure Erase
// Settings 1 (user data) or 2 (cryptographic), or ATA SECURITY ERASE UNIT
// through hdparm with a one-time password. ATA has no crypto-erase here.
func hwErase(ctx context.Context, run runner, d Disk, mode Mode) error {
	if isNVMe(d.Path) {
		ses := "--ses=1"
		if mode == CryptoErase {
			ses = "--ses=2"
		}
		_, err := run.Run(ctx, "nvme", "format", d.Path, ses, "--force")
		return wrapErase(err, d, mode)
	}
	if mode == CryptoErase {
		return errs.New(errs.Unsupported, "disk %s: crypto-erase of an ATA/SCSI disk is not implemented; use secure-erase or quick", d.Name)
	}
	pass := oneTimePassword() // a secret for the length of the erase; never logged
	if _, err := run.Run(ctx, "hdparm", "--user-master", "u", "--security-set-pass", pass, d.Path); err != nil {
		return wrapErase(err, d, mode)
	}
	_, err := run.Run(ctx, "hdparm", "--user-master", "u", "--security-erase", pass, d.Path)
	return wrapErase(err, d, mode)
}

func wrapErase(err error, d Disk, mode Mode) error {
	if err == nil {
		return nil
	}
	if errs.Is(err, errs.Unsupported) {
		return errs.Wrap(errs.Unsupported, err, "disk %s: %s needs a tool the ramdisk lacks", d.Name, mode)
	}
	return errs.Wrap(errs.DriverError, err, "disk %s: %s failed", d.Name, mode)
}

func oneTimePassword() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// probeErase asks the drive which erases it supports. A tool that is missing
// or fails means "not supported": Wipe then refuses those modes loudly.
func probeErase(ctx context.Context, run runner, dev string) (secure, crypto bool) {
	if isNVMe(dev) {
		out, err := run.Run(ctx, "nvme", "id-ctrl", "-o", "json", dev)
		if err != nil {
			return false, false
		}
		return parseNVMeIDCtrl(out)
	}
	out, err := run.Run(ctx, "hdparm", "-I", dev)
	if err != nil {
		return false, false
	}
	return parseHdparmSecurity(out), false
}

// parseNVMeIDCtrl reads `nvme id-ctrl -o json`: OACS bit 1 is Format NVM,
// FNA bit 2 is cryptographic erase as part of a format.
func parseNVMeIDCtrl(out []byte) (secure, crypto bool) {
	var id struct {
		OACS int `json:"oacs"`
		FNA  int `json:"fna"`
	}
	if json.Unmarshal(out, &id) != nil {
		return false, false
	}
	format := id.OACS&0x2 != 0
	return format, format && id.FNA&0x4 != 0
}

// parseHdparmSecurity reads the "Security:" section of `hdparm -I`: the
// feature must be supported and the drive not frozen (a frozen drive refuses
// SECURITY ERASE until a suspend/resume cycle).
func parseHdparmSecurity(out []byte) bool {
	var inSec, supported, frozen bool
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Security:") {
			inSec = true
			continue
		}
		if !inSec {
			continue
		}
		if line != "" && line[0] != '\t' && line[0] != ' ' {
			break // next section
		}
		switch strings.Join(strings.Fields(line), " ") {
		case "supported":
			supported = true
		case "frozen":
			frozen = true
		}
	}
	return supported && !frozen
}
