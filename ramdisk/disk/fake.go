package disk

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
)

// A fake disk is <dir>/<name>.img (a sparse file of the disk's size) and
// <dir>/<name>.json (this sidecar). Both builds can create and wipe them; only
// the fakehw build enumerates them as the machine's disks.
type sidecar struct {
	WWN         string `json:"wwn,omitempty"`
	Serial      string `json:"serial,omitempty"`
	Model       string `json:"model,omitempty"`
	Rotational  bool   `json:"rotational,omitempty"`
	SecureErase bool   `json:"secureErase,omitempty"`
	CryptoErase bool   `json:"cryptoErase,omitempty"`
	// CryptoKey is the emulated media encryption key: crypto-erase replaces it.
	CryptoKey string `json:"cryptoKey,omitempty"`
	Fault     Fault  `json:"fault,omitzero"`
}

// Fault makes a fake disk misbehave, so tests of the control plane's
// attestation check see a wipe that did not verify.
type Fault struct {
	// ReadBackError makes every read-back read fail with an I/O error.
	ReadBackError bool `json:"readBackError,omitempty"`
	// LeaveNonzero, when set, makes the erase leave one nonzero 4 KiB block
	// at NonzeroAt, as firmware that skipped a range would.
	LeaveNonzero bool  `json:"leaveNonzero,omitempty"`
	NonzeroAt    int64 `json:"nonzeroAt,omitempty"`
}

const fakeExt = ".img"

func sidecarPath(imgPath string) string { return strings.TrimSuffix(imgPath, fakeExt) + ".json" }

// CreateFakeDisk creates the fake disk d in dir: a sparse file of d.SizeBytes
// (made with Truncate, so a 16 TiB disk costs nothing) and its sidecar. d.Name
// is NameFor(d.WWN, d.Serial) (or empty); d.Path is ignored (it is dir/<name>.img).
// Creating a disk that exists is ALREADY_EXISTS.
func CreateFakeDisk(dir string, d Disk) error {
	name := NameFor(d.WWN, d.Serial)
	if name == "" {
		return errs.Invalid("disk.wwn", "a fake disk needs a WWN or a serial")
	}
	if d.Name != "" && d.Name != name {
		return errs.Invalid("disk.name", "name %q does not match the WWN/serial (want %q)", d.Name, name)
	}
	if d.SizeBytes <= 0 || d.SizeBytes%512 != 0 {
		return errs.Invalid("disk.sizeBytes", "size %d is not a positive multiple of 512", d.SizeBytes)
	}
	img := filepath.Join(dir, name+fakeExt)
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if os.IsExist(err) {
		return errs.New(errs.AlreadyExists, "fake disk %s already exists in %s", name, dir)
	}
	if err != nil {
		return errs.Wrap(errs.DriverError, err, "create fake disk %s", name)
	}
	defer f.Close()
	if err := f.Truncate(d.SizeBytes); err != nil {
		os.Remove(img)
		return errs.Wrap(errs.DriverError, err, "size fake disk %s to %d bytes", name, d.SizeBytes)
	}
	sc := sidecar{WWN: d.WWN, Serial: d.Serial, Model: d.Model, Rotational: d.Rotational,
		SecureErase: d.SupportsSecureErase, CryptoErase: d.SupportsCryptoErase}
	if sc.CryptoErase {
		sc.CryptoKey = newKey()
	}
	if err := writeSidecar(img, sc); err != nil {
		os.Remove(img)
		return err
	}
	return nil
}

// InjectFault sets the fault of the fake disk d (a zero Fault clears it).
func InjectFault(d Disk, f Fault) error {
	sc, err := readSidecar(d.Path)
	if err != nil {
		return err
	}
	sc.Fault = f
	return writeSidecar(d.Path, sc)
}

// FakeKey returns the emulated media key of the fake disk d; crypto-erase changes it.
func FakeKey(d Disk) (string, error) {
	sc, err := readSidecar(d.Path)
	return sc.CryptoKey, err
}

func readSidecar(imgPath string) (sidecar, error) {
	var sc sidecar
	b, err := os.ReadFile(sidecarPath(imgPath))
	if err != nil {
		return sc, errs.Wrap(errs.DriverError, err, "read fake disk sidecar of %s", imgPath)
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		return sc, errs.Wrap(errs.DriverError, err, "parse fake disk sidecar of %s", imgPath)
	}
	return sc, nil
}

// writeSidecar replaces the sidecar atomically.
func writeSidecar(imgPath string, sc sidecar) error {
	b, err := json.MarshalIndent(sc, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode sidecar")
	}
	p := sidecarPath(imgPath)
	if err := atomicfile.Write(p, append(b, '\n'), 0o600); err != nil {
		return errs.Wrap(errs.DriverError, err, "write fake disk sidecar %s", p)
	}
	return nil
}

// fakeDiskFromSidecar builds the Disk for the image file at img.
func fakeDiskFromSidecar(img string, size int64, sc sidecar) Disk {
	name := strings.TrimSuffix(filepath.Base(img), fakeExt)
	return Disk{Name: name, WWN: sc.WWN, Serial: sc.Serial, Model: sc.Model, SizeBytes: size,
		Path: img, Rotational: sc.Rotational, SupportsSecureErase: sc.SecureErase,
		SupportsCryptoErase: sc.CryptoErase}
}

func newKey() string {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(k[:])
}
