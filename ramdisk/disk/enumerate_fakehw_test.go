//go:build fakehw

package disk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
)

func TestFakeEnumerate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []Disk{
		{WWN: "0x5000c500a1b2c3d4", Serial: "ZL1", Model: "FAKE-HDD", SizeBytes: 16 << 40, Rotational: true, SupportsSecureErase: true},
		{Serial: "NVME-2", Model: "FAKE-NVME", SizeBytes: 4 << 40, SupportsSecureErase: true, SupportsCryptoErase: true},
	} {
		if err := CreateFakeDisk(dir, d); err != nil && !errs.Is(err, errs.DriverError) {
			t.Fatal(err)
		} else if err != nil { // ext4 stops 4 KiB short of 16 TiB
			d.SizeBytes = 16<<40 - 1<<20
			if err := CreateFakeDisk(dir, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := Host{Dir: dir}.Enumerate(context.Background())
	if err != nil {
		t.Fatalf("Host.Enumerate() = %v", err)
	}
	hdd := got[1].SizeBytes // whatever the filesystem allowed
	want := []Disk{
		{Name: "serial-NVME-2", Serial: "NVME-2", Model: "FAKE-NVME", SizeBytes: 4 << 40,
			Path: filepath.Join(dir, "serial-NVME-2.img"), SupportsSecureErase: true, SupportsCryptoErase: true},
		{Name: "wwn-0x5000c500a1b2c3d4", WWN: "0x5000c500a1b2c3d4", Serial: "ZL1", Model: "FAKE-HDD", SizeBytes: hdd,
			Path: filepath.Join(dir, "wwn-0x5000c500a1b2c3d4.img"), Rotational: true, SupportsSecureErase: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Host.Enumerate() mismatch (-want +got):\n%s", diff)
	}
	if _, err := (Host{}).Enumerate(context.Background()); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("Host{}.Enumerate() = %v, want INVALID_INPUT", err)
	}
}

func TestFakeKexec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kernel := filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(kernel, []byte("kernel"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := Host{Dir: dir}
	if err := h.Kexec(context.Background(), kernel, "", "root=LABEL=root console=ttyS0"); err != nil {
		t.Fatalf("Kexec() = %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kexec.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec KexecRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("kernel"))
	if rec.Kernel != kernel || rec.Cmdline != "root=LABEL=root console=ttyS0" || rec.KernelSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("Kexec() recorded %+v", rec)
	}
	if err := h.Kexec(context.Background(), filepath.Join(dir, "missing"), "", ""); !errs.Is(err, errs.DriverError) {
		t.Errorf("Kexec(missing kernel) = %v, want DRIVER_ERROR", err)
	}
}
