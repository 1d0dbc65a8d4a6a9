// Package disk owns the machine-side disk work of the ramdisk (bcd ramdisk):
// naming disks by WWN else serial (never by kernel name such as /dev/sdX),
// enumerating them, wiping them (quick, secure-erase, crypto-erase) with a
// read-back that proves what it claims, streaming an OS image onto a disk
// (digest-checked, decompressed, sparse-aware, resumable), and kexec into the
// installed kernel.
//
// Under the fakehw build tag a disk is a sparse file plus a small JSON sidecar
// in a directory (see CreateFakeDisk), so the same wipe and image logic runs on
// multi-terabyte sparse files in tests and in the emulated rack. Wipe and
// WriteImage decide by what Disk.Path is (a regular file or a block device), not
// by build tag; only Host.Enumerate, Host.Kexec and the write log a fake disk
// keeps of WriteImage (ImageWrites, for tests) differ between builds.
package disk

import (
	"strings"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// Disk is one disk of the machine.
type Disk struct {
	Name                string // stable name: "wwn-0x…" or "serial-…"
	WWN                 string // e.g. "0x5000c500a1b2c3d4", or an NVMe eui./nguid
	Serial              string
	Model               string
	SizeBytes           int64
	Path                string // device node, or the backing file under fakehw
	Rotational          bool
	SupportsSecureErase bool
	SupportsCryptoErase bool
}

// Host is the machine the ramdisk runs on. In the default build Dir is the
// root of the filesystem to read /sys and /dev from ("" means "/"); under
// fakehw it is the directory holding the fake disks and the kexec record.
type Host struct {
	Dir string
}

// NameFor returns the stable name of a disk: "wwn-<wwn>" when the disk has a
// WWN, else "serial-<serial>", else "" (such a disk cannot be named and the
// caller must refuse to act on it). Characters other than letters, digits and
// ".-_:" are replaced by "_" so the name is safe as a file name and a label.
func NameFor(wwn, serial string) string {
	switch {
	case strings.TrimSpace(wwn) != "":
		return "wwn-" + cleanName(strings.ToLower(strings.TrimSpace(wwn)))
	case strings.TrimSpace(serial) != "":
		return "serial-" + cleanName(strings.TrimSpace(serial))
	}
	return ""
}

func cleanName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		case r == '.' || r == '-' || r == '_' || r == ':':
			return r
		}
		return '_'
	}, s)
}

// Mode is a wipe mode, by the spec's names. "none" is not a Mode: the caller
// skips the wipe (and the release is then unattested).
type Mode string

const (
	Quick       Mode = "quick"        // head and tail zeroed, the rest discarded/zeroed cheaply
	SecureErase Mode = "secure-erase" // ATA security erase / NVMe format with user-data erase
	CryptoErase Mode = "crypto-erase" // NVMe format with cryptographic erase (new media key)
)

// ParseMode returns the Mode named s, or INVALID_INPUT for anything else
// (including "none", which the caller handles before asking for a wipe).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Quick, SecureErase, CryptoErase:
		return m, nil
	}
	return "", errs.Invalid("wipe", "unknown wipe mode %q: use quick, secure-erase or crypto-erase", s)
}

// Progress is what a wipe reports while it runs, so a heartbeat can carry it.
type Progress struct {
	Disk  string
	Phase string // "erase" or "verify"
	Done  int64  // bytes done in this phase
	Total int64  // bytes this phase will cover
}

// Result is the outcome of a wipe. Verified is true only when the read-back
// found every byte it checked to be zero and checked what the mode promises.
type Result struct {
	Disk          string
	Mode          Mode
	SizeBytes     int64
	BytesVerified int64  // bytes of the logical disk proven zero (read, or a hole per SEEK_HOLE)
	BytesRead     int64  // bytes actually read back
	Verified      bool   // the read-back passed
	ZeroCheck     string // what the read-back covered, e.g. "extents: 3 data (12 MiB read), holes 16 TiB"
	Failure       string // why Verified is false: the first nonzero offset or the read error
	Started       time.Time
	Finished      time.Time
}
